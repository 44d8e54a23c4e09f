package robustness

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"go.etcd.io/etcd/tests/v3/robustness/report"
	"go.etcd.io/etcd/tests/v3/robustness/traffic"
	"go.etcd.io/etcd/tests/v3/robustness/validate"
)

// validation is the outcome of etcd's validators for one run, part by part
// ("Success", "Failure: ...", or "" when a part did not run).
type validation struct {
	Assumptions   string `json:"assumptions"`
	Linearization string `json:"linearization"`
	Watch         string `json:"watch"`
	Serializable  string `json:"serializable"`
}

// validateRun reads the members' WAL as the persisted requests and runs
// validate.ValidateAndReturnVisualize over every client report. No persisted
// request is an error: without them etcd's validator silently skips the
// watch and serializable checks.
func validateRun(lg *zap.Logger, c *cluster, s scenario, run trafficRun) (validation, validate.RobustnessResult, error) {
	persisted, err := report.PersistedRequests(lg, c.dataDirs())
	if err != nil {
		return validation{}, validate.RobustnessResult{}, fmt.Errorf("read the persisted requests from the members' WAL (<data-dir>/member/wal): %w", err)
	}
	if len(persisted) == 0 {
		return validation{}, validate.RobustnessResult{}, fmt.Errorf("no persisted request in the members' WAL (<data-dir>/member/wal); the watch and serializable validations need them")
	}
	cfg := validate.Config{ExpectRevisionUnique: s.traffic.ExpectUniqueRevision()}
	res := validate.ValidateAndReturnVisualize(lg, cfg, run.reports, persisted, 5*time.Minute)
	v := validation{
		Assumptions:   res.Assumptions.String(),
		Linearization: res.Linearization.String(),
		Watch:         res.Watch.String(),
		Serializable:  res.Serializable.String(),
	}
	lg.Info("validated", zap.Int("persisted-requests", len(persisted)), zap.Any("result", v))
	return v, res, res.Error()
}

// checkHashes compares HashKV of every member at one revision, as etcd's
// CheckEndOfTestHashKV does: the members must hold the same key space.
func checkHashes(ctx context.Context, c *cluster) error {
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("dial %v: %w", c.endpoints(), err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	first, err := cl.HashKV(ctx, c.members[0].clientURL, 0)
	if err != nil {
		return fmt.Errorf("HashKV of %s: %w", c.members[0].name, err)
	}
	rev := first.Header.Revision
	for _, m := range c.members {
		h, err := cl.HashKV(ctx, m.clientURL, rev)
		if err != nil {
			return fmt.Errorf("HashKV of %s at revision %d: %w", m.name, rev, err)
		}
		if h.CompactRevision != first.CompactRevision || h.Hash != first.Hash {
			return fmt.Errorf("HashKV at revision %d: %s has hash %d (compacted at %d), %s has %d (compacted at %d)",
				rev, c.members[0].name, first.Hash, first.CompactRevision, m.name, h.Hash, h.CompactRevision)
		}
	}
	return nil
}

// trafficFigures are the traffic's success counts and rates, for the report.
type trafficFigures struct {
	Successes   int     `json:"successes"`
	Failures    int     `json:"failures"`
	QPS         float64 `json:"qps"`
	WatchEvents int     `json:"watch_events"`
	MaxRevision int64   `json:"max_revision"`
}

func figures(run trafficRun) trafficFigures {
	st := traffic.CalculateStats(run.reports, run.start, run.end)
	ws := traffic.CalculateWatchStats(run.reports, run.start, run.end)
	return trafficFigures{Successes: st.Successes, Failures: st.Failures, QPS: st.QPS(),
		WatchEvents: ws.Events, MaxRevision: run.maxRev}
}
