package keyspace

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Compact compacts the store at its current revision, waiting for the
// compaction to be applied (physical), as the apiserver's compactor asks.
// kine has answered a compaction at the revision its own Range header had
// just reported with ErrFutureRev; such a compaction is retried a few times
// at a freshly read revision.
func Compact(ctx context.Context, c *clientv3.Client) (int64, error) {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var resp *clientv3.GetResponse
		resp, err = c.Get(ctx, "/bench/compact-probe")
		if err != nil {
			return 0, fmt.Errorf("read current revision: %w", err)
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
	return 0, fmt.Errorf("compact: %w (5 attempts)", err)
}

// Defragment asks the server to rewrite its backend file (etcd only; others
// may not implement it).
func Defragment(ctx context.Context, c *clientv3.Client, endpoint string) error {
	if _, err := c.Defragment(ctx, endpoint); err != nil {
		return fmt.Errorf("defragment %s: %w", endpoint, err)
	}
	return nil
}
