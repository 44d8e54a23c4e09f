package move

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Bounds of issue #32 for every install and undo on a quiet machine: the
// API server's downtime, and the delay until kube-controller-manager and
// kube-scheduler lead again after it answers.
const (
	roundDowntimeLimit = 8 * time.Second
	roundLeadersLimit  = 5 * time.Second
)

// TestRoundsInARow: QK_MOVE_ROUNDS install/undo rounds in a row on one
// cluster, each step's API-server downtime and each leader's delay in a
// table (for docs/benchmarks.md), none over the bounds. Opt-in (a
// measurement for a quiet machine, not one of CI's checks): run with
// QK_MOVE_ROUNDS=10 QK_MOVE_RUN=TestRoundsInARow scripts/kubeadm.sh move.
func TestRoundsInARow(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("QK_MOVE_ROUNDS"))
	if rounds <= 0 {
		t.Skip("QK_MOVE_ROUNDS is not set: a measurement run, not a CI check")
	}
	c := setup(t)
	if c.onStore(t) {
		c.mustNode(t, "quantykube", "undo", "store")
	}
	c.serving(t)
	defer c.settle(t)
	var table []string
	var over []string
	for r := 1; r <= rounds; r++ {
		for _, op := range []string{"install", "undo"} {
			c.leadersHeld(t)
			t0 := time.Now()
			out := c.mustNode(t, "quantykube", op, "store")
			took := time.Since(t0)
			down := undoDowntime(t, out)
			leaders := leadersAgain(t, out)
			c.serving(t)
			row := fmt.Sprintf("| %d | %s | %.2f | %s | %.0f |", r, op, down.Seconds(), leaders, took.Seconds())
			table = append(table, row)
			t.Logf("round %d %s store: API-server downtime %v, leaders again %s, command %v", r, op, down.Round(time.Millisecond), leaders, took.Round(time.Second))
			var why []string
			if down > roundDowntimeLimit {
				why = append(why, fmt.Sprintf("downtime %v", down))
				t.Logf("round %d %s store over %v; its output:\n%s\nwhat kubelet did meanwhile:\n%s", r, op, roundDowntimeLimit, out, c.kubeletSince(t0))
			}
			delays := leaderDelays(out)
			for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
				if d, ok := delays[name]; !ok {
					why = append(why, name+" not seen leading again (its Lease was stale or it stayed down: see the output)")
				} else if d > roundLeadersLimit {
					why = append(why, fmt.Sprintf("%s again after %v", name, d))
				}
			}
			if len(why) > 0 {
				over = append(over, fmt.Sprintf("round %d %s: %s", r, op, strings.Join(why, ", ")))
			}
		}
	}
	t.Logf("ROUNDS TABLE (round | step | API-server downtime s | leaders again after the API server answered: kube-controller-manager, kube-scheduler s | command s):\n%s", strings.Join(table, "\n"))
	if len(over) > 0 {
		t.Errorf("%d of %d steps over the bounds (downtime %v, leaders %v): %s", len(over), 2*rounds, roundDowntimeLimit, roundLeadersLimit, strings.Join(over, "; "))
	}
}

// leadersAgainRE is what the leaders step prints for each leader.
var leadersAgainRE = regexp.MustCompile(`(kube-controller-manager|kube-scheduler) leads again \(.* renewed its Lease ([0-9.]+m?s) after the API server answered\)`)

// leaderDelays is each leader's delay as the leaders step printed it.
func leaderDelays(out string) map[string]time.Duration {
	ds := map[string]time.Duration{}
	for _, m := range leadersAgainRE.FindAllStringSubmatch(out, -1) {
		if d, err := time.ParseDuration(m[2]); err == nil {
			ds[m[1]] = d
		}
	}
	return ds
}

// leadersAgain is "kcm, scheduler" in seconds ("–" for one not waited for).
func leadersAgain(t *testing.T, out string) string {
	t.Helper()
	ds := leaderDelays(out)
	f := func(name string) string {
		if d, ok := ds[name]; ok {
			return fmt.Sprintf("%.1f", d.Seconds())
		}
		return "–"
	}
	return f("kube-controller-manager") + ", " + f("kube-scheduler")
}

// kubeletSince is what kubelet logged about the control plane's static
// pods since t0, and their containers now: when each pod was synced,
// killed, backed off and started, to tell a slow start from a slow
// readiness.
func (c *cluster) kubeletSince(t0 time.Time) string {
	since := t0.UTC().Format("2006-01-02 15:04:05")
	out, _ := c.node("sh", "-c", "journalctl -u kubelet --utc --no-pager --since '"+since+"' | "+
		"grep -E 'kube-apiserver|kube-controller-manager|kube-scheduler|etcd-' | "+
		"grep -Ev 'reconciler_common|operation_generator|status_manager|mirror_client|event.go|controller.go' | cut -c1-400 | tail -60; "+
		"crictl ps -a -o table 2>/dev/null | head -20; "+
		// why an exited control-plane container exited: its last lines
		"for id in $(crictl ps -a -q --state exited 2>/dev/null); do "+
		"echo \"--- exited container $id:\"; crictl inspect -o go-template --template '{{.status.metadata.name}} exit {{.status.exitCode}} {{.status.reason}} {{.status.startedAt}} {{.status.finishedAt}}' $id 2>/dev/null; echo; "+
		"crictl logs --tail 12 $id 2>&1 | cut -c1-300; done")
	return out
}
