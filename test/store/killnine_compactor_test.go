package storee2e

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// compactLag is how far behind the newest acknowledged write the compactor
// compacts.
const compactLag = 500

// compactor compacts every 100 ms to compactLag revisions behind the newest
// acknowledged write. Invariants: attempted only grows and is recorded before
// the request is sent; acked <= attempted.
type compactor struct {
	log *ackLog

	mu        sync.Mutex
	acked     int64
	attempted int64
}

func (c *compactor) run(ctx context.Context, cli *clientv3.Client) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		target := c.log.newest() - compactLag
		c.mu.Lock()
		if target <= c.attempted {
			c.mu.Unlock()
			continue
		}
		c.attempted = target
		c.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.Compact(cctx, target)
		cancel()
		if err == nil {
			c.mu.Lock()
			c.acked = max(c.acked, target)
			c.mu.Unlock()
		}
	}
}

// revs returns the highest acknowledged and the highest attempted compaction.
func (c *compactor) revs() (acked, attempted int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acked, c.attempted
}
