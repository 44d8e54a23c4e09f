package storee2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestClusterKillLeaderFollowerClients is the bench's failover workload as a
// test: one writer per follower, each on a client of that follower alone
// (no balancer to hide a member that stops serving), puts every 20 ms, each
// with a 2 s timeout; the leader is SIGKILLed five times and restarted, the
// cluster healthy again before the next kill. Before the kills the cluster
// takes the bench's load first (failoverPreload puts from 64 clients over
// all endpoints), so that the log has been snapshotted and truncated a few
// times, as in bench/run.sh --members 3. Checked: after every kill a put
// issued after the kill is acknowledged through a survivor (within 30 s);
// the time to it is logged, never asserted.
func TestClusterKillLeaderFollowerClients(t *testing.T) {
	c := startCluster(t, 3, clusterOptions{})
	preload(t, c, failoverPreload)
	for round := 1; round <= 5; round++ {
		li := c.leader(30 * time.Second)
		killed := c.Members[li]
		var mark atomic.Int64
		acked := make(chan time.Duration, len(c.Members))
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for i, m := range c.Members {
			if i == li {
				continue
			}
			cl := m.Client()
			wg.Go(func() {
				defer cl.Close()
				pinnedPutLoop(ctx, cl, fmt.Sprintf("failover/m%d", i), &mark, acked)
			})
		}
		time.Sleep(time.Second) // the load runs before the kill
		start := time.Now()
		mark.Store(start.UnixNano())
		killed.Kill9()
		select {
		case d := <-acked:
			t.Logf("round %d: killed leader %s; first put issued after the kill acknowledged after %v", round, killed.Name, d.Round(time.Millisecond))
		case <-time.After(30 * time.Second):
			stop()
			wg.Wait()
			t.Fatalf("round %d: killed leader %s; no put issued after the kill acknowledged by a survivor within 30 s", round, killed.Name)
		}
		nl := c.leader(30 * time.Second)
		t.Logf("round %d: new leader %s after %v", round, c.Members[nl].Name, time.Since(start).Round(time.Millisecond))
		stop()
		wg.Wait()
		killed.startProc()
		killed.waitReady()
	}
	c.waitCaughtUp(30 * time.Second)
	c.checkSameState(0)
}

// pinnedPutLoop puts key every 20 ms until ctx ends, open loop (each put on
// its own goroutine, 2 s timeout, so a put stuck on a dead leader does not
// hold back the next): the time from mark to the completion of the first put
// issued at or after mark goes to acked, once.
func pinnedPutLoop(ctx context.Context, kv clientv3.KV, key string, mark *atomic.Int64, acked chan<- time.Duration) {
	var once sync.Once
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(20 * time.Millisecond)
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
			_, err := kv.Put(pctx, key, issued.String())
			if m := mark.Load(); err == nil && m != 0 && issued.UnixNano() >= m {
				once.Do(func() { acked <- time.Since(time.Unix(0, m)) })
			}
		})
	}
}

// failoverPreload is how many puts precede the kills: about the bench's
// put@64 and txn-put runs (50000 each), several --snapshot-count intervals.
const failoverPreload = 60000

// preload puts n keys of 256 bytes (a keyspace of 100000) through 64
// goroutines on a client of every endpoint, as etcd's benchmark tool does.
func preload(t *testing.T, c *cluster, n int) {
	t.Helper()
	cl := c.Client()
	defer cl.Close()
	start := time.Now()
	var next atomic.Int64
	var failed atomic.Int64
	val := strings.Repeat("v", 256)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if _, err := cl.Put(ctx, fmt.Sprintf("preload/%08d", i%100000), val); err != nil {
					failed.Add(1)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Fatalf("preload: %d of %d puts failed with every member up", f, n)
	}
	t.Logf("preload: %d puts in %v", n, time.Since(start).Round(time.Millisecond))
}
