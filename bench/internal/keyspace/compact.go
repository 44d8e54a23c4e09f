package keyspace

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Compact compacts the store at its current revision, waiting for the
// compaction to be applied (physical), as the apiserver's compactor asks.
func Compact(ctx context.Context, c *clientv3.Client) (int64, error) {
	resp, err := c.Get(ctx, "/bench/compact-probe")
	if err != nil {
		return 0, fmt.Errorf("read current revision: %w", err)
	}
	rev := resp.Header.Revision
	if _, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return rev, fmt.Errorf("compact at %d: %w", rev, err)
	}
	return rev, nil
}

// Defragment asks the server to rewrite its backend file (etcd only; others
// may not implement it).
func Defragment(ctx context.Context, c *clientv3.Client, endpoint string) error {
	if _, err := c.Defragment(ctx, endpoint); err != nil {
		return fmt.Errorf("defragment %s: %w", endpoint, err)
	}
	return nil
}
