package keyspace

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// compactProbe is the key Compact writes before it compacts.
const compactProbe = "/bench/compact-probe"

// Compact compacts the store at its current revision, waiting for the
// compaction to be applied (physical), as the apiserver's compactor asks.
//
// The revision is the one a write of compactProbe returned, not a read's:
// the apiserver's compactor, too, writes (its compact_rev_key transaction)
// before it compacts. kine (v0.17.5) checks a compaction against a cached
// current revision that concurrent writes can leave behind the table's
// newest row until the next single write; a read's header (taken from the
// table) then names a revision kine calls future, on every retry alike —
// the bench's CI run of 7 December failed five times at the same 17371.
// A write moves kine's cache to its own revision, so the compaction holds.
func Compact(ctx context.Context, c *clientv3.Client) (int64, error) {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var resp *clientv3.PutResponse
		resp, err = c.Put(ctx, compactProbe, fmt.Sprint(attempt))
		if err != nil {
			return 0, fmt.Errorf("write %s before compacting: %w", compactProbe, err)
		}
		rev := resp.Header.Revision
		if _, err = c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err == nil {
			return rev, nil
		}
		if !errors.Is(err, rpctypes.ErrFutureRev) {
			return rev, fmt.Errorf("compact at %d: %w", rev, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return 0, fmt.Errorf("compact: %w (5 attempts, each after a write)", err)
}

// Defragment asks the server to rewrite its backend file (etcd only; others
// may not implement it).
func Defragment(ctx context.Context, c *clientv3.Client, endpoint string) error {
	if _, err := c.Defragment(ctx, endpoint); err != nil {
		return fmt.Errorf("defragment %s: %w", endpoint, err)
	}
	return nil
}
