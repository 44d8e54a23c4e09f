package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quantyroot/quantykube/bench/internal/report"
	"github.com/quantyroot/quantykube/bench/internal/server"
)

// Metrics of the failover workload.
const (
	metricNewLeader   = "kill to a new leader elected"
	metricLeaderWrite = "kill to the first write acknowledged"
)

// failoverWriteGap is the time between one writer's puts (open loop): 50
// writes/s per surviving member, a light load, and the resolution of the
// "first write" figure.
const failoverWriteGap = 20 * time.Millisecond

// runFailover kills the leader h.p.Failovers times, each under a light write
// load: one writer per surviving member, each on a client of that member
// alone (followers forward to the leader), so the figure is the servers'
// and not a client balancer's. It records the time from the kill -9 until a
// survivor reports a new leader, and until the first put issued after the
// kill is acknowledged. After each kill the member restarts on its data dir
// and the cluster is healthy again before the next.
func (h *harness) runFailover(ctx context.Context, c *server.Cluster, add adder) error {
	for i := range h.p.Failovers {
		newLeader, firstWrite, err := failoverOnce(ctx, c)
		if err != nil {
			return fmt.Errorf("failover %d: %w", i+1, err)
		}
		slog.Info("failover", "store", c.Kind, "n", i+1, "new_leader", newLeader, "first_write", firstWrite)
		add(wlFailover, metricNewLeader, "ms", report.Lower, ms(newLeader))
		add(wlFailover, metricLeaderWrite, "ms", report.Lower, ms(firstWrite))
	}
	return nil
}

func failoverOnce(ctx context.Context, c *server.Cluster) (newLeader, firstWrite time.Duration, err error) {
	leader, oldID, err := waitLeader(ctx, c)
	if err != nil {
		return 0, 0, err
	}
	var mark atomic.Int64 // kill time (UnixNano); 0 before the kill
	acked := make(chan time.Time, len(c.Members))
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, m := range c.Members {
		if i == leader {
			continue
		}
		cl, err := clientv3.New(clientv3.Config{Endpoints: []string{m.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			stopWriters()
			wg.Wait()
			return 0, 0, fmt.Errorf("client of %s: %w", m.Endpoint, err)
		}
		wg.Go(func() {
			defer cl.Close()
			putLoop(wctx, cl, fmt.Sprintf("/bench/failover/m%d", i), &mark, acked)
		})
	}
	defer func() {
		stopWriters()
		wg.Wait()
	}()
	select { // the load runs before the kill
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-time.After(time.Second):
	}
	killed := time.Now()
	mark.Store(killed.UnixNano())
	c.Kill(leader)
	elected := make(chan time.Duration, 1)
	go func() { elected <- waitNewLeader(wctx, c, leader, oldID, killed) }()
	select {
	case t := <-acked:
		firstWrite = t.Sub(killed)
	case <-time.After(30 * time.Second):
		return 0, 0, errors.New("no write acknowledged within 30 s of the leader's kill -9")
	}
	select {
	case newLeader = <-elected:
	case <-time.After(30 * time.Second):
	}
	stopWriters()
	wg.Wait()
	if err := c.Restart(leader); err != nil {
		return 0, 0, err
	}
	if err := c.WaitHealthy(ctx, time.Minute); err != nil {
		return 0, 0, fmt.Errorf("after restarting the killed leader: %w", err)
	}
	if newLeader <= 0 {
		return 0, 0, errors.New("no survivor reported a new leader")
	}
	return newLeader, firstWrite, nil
}

// putLoop issues a put of key every failoverWriteGap until ctx ends, open
// loop (each put on its own goroutine, 2 s timeout), so that a put stuck on a
// dead leader does not delay the next one: the completion time of the first
// put issued after mark was set goes to acked (once per writer).
func putLoop(ctx context.Context, cl *clientv3.Client, key string, mark *atomic.Int64, acked chan<- time.Time) {
	var once sync.Once
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(failoverWriteGap)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		issued := time.Now()
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := cl.Put(pctx, key, issued.String())
			if m := mark.Load(); err == nil && m != 0 && issued.UnixNano() >= m {
				done := time.Now()
				once.Do(func() { acked <- done })
			}
		})
	}
}

// waitLeader waits up to 30 s for a member that says it leads.
func waitLeader(ctx context.Context, c *server.Cluster) (int, uint64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if i := c.Leader(ctx); i >= 0 {
			id, err := c.MemberID(ctx, i)
			if err == nil {
				return i, id, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return -1, 0, errors.New("no leader within 30 s")
}

// waitNewLeader polls the survivors every 10 ms until one reports a leader
// other than oldID, and returns the time since killed (0 if ctx ended first).
func waitNewLeader(ctx context.Context, c *server.Cluster, dead int, oldID uint64, killed time.Time) time.Duration {
	for ctx.Err() == nil {
		for i := range c.Members {
			if i == dead {
				continue
			}
			if id, err := c.LeaderID(ctx, i); err == nil && id != 0 && id != oldID {
				return time.Since(killed)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0
}
