package robustness

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"go.etcd.io/etcd/tests/v3/robustness/report"
)

var (
	flagServer       = flag.String("server", serverEtcd, "what to run: etcd or store (quantykube store)")
	flagBin          = flag.String("bin", "", "the etcd binary, or the quantykube binary for -server store")
	flagDuration     = flag.Duration("duration", 40*time.Second, "traffic time per scenario")
	flagKillInterval = flag.Duration("kill-interval", 4*time.Second, "mean time between kills (each 0.5–1.5× this)")
	flagLeaderShare  = flag.Float64("leader-share", 0.3, "chance that a kill picks the current leader")
	flagResults      = flag.String("results", "", "directory for logs, data dirs and the report (default: a temporary one)")
	flagWipe         = flag.Bool("broken-wipe-on-restart", false, "BROKEN ON PURPOSE: restart a killed member on an empty data dir, to show the validators catch it")
	flagKeepData     = flag.Bool("keep-data", false, "keep the members' data dirs of a passing scenario")
	flagExtraArgs    = flag.String("extra-args", "", "extra server flags for every member, space-separated")
)

// outcome is one scenario's summary, written as summary.json and printed.
type outcome struct {
	Scenario   string         `json:"scenario"`
	Server     string         `json:"server"`
	Broken     bool           `json:"broken_wipe_on_restart,omitempty"`
	Duration   string         `json:"traffic_duration"`
	Kills      []kill         `json:"kills"`
	Traffic    trafficFigures `json:"traffic"`
	Validation validation     `json:"validation"`
	HashKV     string         `json:"hashkv"`
	Errors     []string       `json:"errors,omitempty"`
	Took       string         `json:"took"`
}

// TestRobustness runs every scenario against a fresh 3-member cluster with
// a member SIGKILLed every few seconds.
func TestRobustness(t *testing.T) {
	if *flagBin == "" {
		t.Fatal("-bin is empty; run test/robustness/run.sh, or pass -bin PATH (etcd, or quantykube with -server store)")
	}
	if *flagServer != serverEtcd && *flagServer != serverStore {
		t.Fatalf("-server %q: use etcd or store", *flagServer)
	}
	results := *flagResults
	if results == "" {
		results = t.TempDir()
	}
	for _, s := range scenarios() {
		t.Run(s.name, func(t *testing.T) {
			dir := filepath.Join(results, s.name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			runScenario(t, s, dir)
		})
	}
}

func runScenario(t *testing.T, s scenario, dir string) {
	began := time.Now()
	lg := zaptest.NewLogger(t, zaptest.Level(zapcore.InfoLevel))
	ctx, cancel := context.WithTimeout(context.Background(), *flagDuration+10*time.Minute)
	defer cancel()
	c, err := startCluster(ctx, clusterConfig{server: *flagServer, bin: *flagBin, members: 3, dir: dir,
		extraArgs: strings.Fields(*flagExtraArgs)})
	if err != nil {
		t.Fatalf("start 3 members of %s: %v", *flagServer, err)
	}
	defer c.kill()
	out := outcome{Scenario: s.name, Server: *flagServer, Broken: *flagWipe, Duration: flagDuration.String()}
	fail := func(format string, args ...any) {
		out.Errors = append(out.Errors, fmt.Sprintf(format, args...))
		t.Errorf(format, args...)
	}
	kc := killConfig{interval: *flagKillInterval, leaderShare: *flagLeaderShare, wipeOnRestart: *flagWipe, readyTimeout: time.Minute}
	run, err := runTraffic(ctx, lg, c, s, kc, *flagDuration)
	out.Kills = run.kills
	if run.killerErr != nil {
		fail("killer: %v", run.killerErr)
	}
	if err != nil {
		fail("traffic: %v", err)
	}
	r := newReport(t, lg, c, dir, s)
	r.SetClientReports(run.reports)
	if err == nil {
		out.Traffic = figures(run)
		v, res, verr := validateRun(lg, c, s, run)
		out.Validation = v
		if verr != nil {
			fail("validation: %v", verr)
		} else {
			r.SetVisualizer(res.Linearization.Visualize)
		}
		out.HashKV = "equal on every member"
		if herr := checkHashes(ctx, c); herr != nil {
			out.HashKV = herr.Error()
			fail("%v", herr)
		}
	}
	out.Took = time.Since(began).Round(time.Second).String()
	c.kill()
	if ferr := r.Finalize(t.Failed(), false); ferr != nil {
		t.Errorf("save the report: %v", ferr)
	}
	writeOutcome(t, dir, out)
	if t.Failed() || *flagKeepData {
		t.Logf("members' data dirs kept in %s (m*.data); delete them when done", dir)
	} else {
		c.removeData()
	}
}

// newReport prepares etcd's test report under dir/report: on failure it
// keeps the client reports, the members' data and the linearization
// visualisation (history.html), like etcd's own suite.
func newReport(t *testing.T, lg *zap.Logger, c *cluster, dir string, s scenario) *report.TestReport {
	paths := map[string]string{}
	for _, m := range c.members {
		paths[m.name] = m.dataDir
	}
	r, err := report.NewTestReport(lg, filepath.Join(dir, "report"), paths,
		&report.TrafficDetail{ExpectUniqueRevision: s.traffic.ExpectUniqueRevision()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// writeOutcome writes dir/summary.json and logs the summary.
func writeOutcome(t *testing.T, dir string, out outcome) {
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	leader := 0
	for _, k := range out.Kills {
		if k.WasLeader {
			leader++
		}
	}
	t.Logf("ROBUSTNESS %s on %s: %d kills (%d of the leader), %d ok / %d failed requests (%.0f qps), %d watch events, max revision %d; linearization %q, watch %q, serializable %q; hashkv: %s; took %s",
		out.Scenario, out.Server, len(out.Kills), leader, out.Traffic.Successes, out.Traffic.Failures, out.Traffic.QPS,
		out.Traffic.WatchEvents, out.Traffic.MaxRevision, out.Validation.Linearization, out.Validation.Watch,
		out.Validation.Serializable, out.HashKV, out.Took)
}
