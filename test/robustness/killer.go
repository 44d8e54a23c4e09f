package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"go.uber.org/zap"
)

// killConfig says how the killer behaves.
type killConfig struct {
	interval      time.Duration // mean time between kills (each wait is 0.5–1.5× this)
	leaderShare   float64       // chance that the victim is the current leader
	wipeOnRestart bool          // BROKEN on purpose: the victim restarts on an empty data dir
	readyTimeout  time.Duration // how long a restarted member may take to answer Status()
}

// kill is one SIGKILL and restart, for the report.
type kill struct {
	At        seconds `json:"at_s"` // since the traffic started
	Member    string  `json:"member"`
	WasLeader bool    `json:"was_leader"`
	Wiped     bool    `json:"wiped,omitempty"`
	Downtime  seconds `json:"downtime_s"` // kill until the restarted member answered Status()
}

// runKiller SIGKILLs a member every interval (jittered) until ctx ends and
// restarts it on the same data dir, waiting until it answers Status() before
// the next kill, so at most one member is down at a time. It returns the
// kills and the first error (a member that did not come back).
func runKiller(ctx context.Context, lg *zap.Logger, c *cluster, cfg killConfig, start time.Time) ([]kill, error) {
	var kills []kill
	for {
		wait := time.Duration(float64(cfg.interval) * (0.5 + rand.Float64()))
		select {
		case <-ctx.Done():
			return kills, nil
		case <-time.After(wait):
		}
		victim, leader := pickVictim(ctx, c, cfg.leaderShare)
		m := c.members[victim]
		k := kill{At: seconds(time.Since(start)), Member: m.name, WasLeader: victim == leader}
		t0 := time.Now()
		m.kill()
		if cfg.wipeOnRestart {
			if err := wipe(m.dataDir); err != nil {
				return kills, err
			}
			// etcd refuses to bootstrap an empty member of an existing
			// cluster with "new" ("member ... has already been
			// bootstrapped"); "existing" makes it rejoin empty.
			m.setInitialClusterState("existing")
			k.Wiped = true
		}
		if err := m.start(); err != nil {
			return kills, err
		}
		// Not ctx: the member must come back even when the traffic has ended.
		rctx, cancel := context.WithTimeout(context.Background(), cfg.readyTimeout)
		err := m.waitServing(rctx)
		cancel()
		k.Downtime = seconds(time.Since(t0))
		kills = append(kills, k)
		if err != nil {
			lg.Error("member did not come back after kill -9", zap.String("member", m.name), zap.Error(err))
			return kills, fmt.Errorf("restart of %s after kill -9: %w", m.name, err)
		}
		lg.Info("member killed and restarted", zap.String("member", m.name), zap.Bool("leader", k.WasLeader),
			zap.Bool("wiped", k.Wiped), zap.Duration("downtime", time.Duration(k.Downtime)))
	}
}

// pickVictim returns the member to kill and the current leader (-1 if none
// answered): the leader with probability leaderShare, else any member.
func pickVictim(ctx context.Context, c *cluster, leaderShare float64) (victim, leader int) {
	leader = c.leader(ctx)
	if leader >= 0 && rand.Float64() < leaderShare {
		return leader, leader
	}
	return rand.IntN(len(c.members)), leader
}

// wipe empties dir (the broken mode: a member that forgets what it acknowledged).
func wipe(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("wipe %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("recreate %s: %w", dir, err)
	}
	return nil
}

// seconds is a duration written to JSON as seconds with millisecond precision.
type seconds time.Duration

func (s seconds) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.3f", time.Duration(s).Seconds())), nil
}
