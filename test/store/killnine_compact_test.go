package storee2e

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// verifyCompactionSurvives compacts at the middle acknowledged revision,
// kills the server, restarts it, and checks that the compaction held: reads
// below it fail with ErrCompacted, reads at or above it return the acks.
func verifyCompactionSurvives(t *testing.T, s *server, acks []ack) {
	t.Helper()
	sorted := slices.Clone(acks)
	slices.SortFunc(sorted, func(a, b ack) int { return int(a.Rev - b.Rev) })
	mid := sorted[len(sorted)/2]
	cli := s.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cli.Compact(ctx, mid.Rev); err != nil {
		t.Fatalf("compact at %d: %v", mid.Rev, err)
	}
	cli.Close()
	s.Kill9()
	s.Start()

	cli = s.Client()
	defer cli.Close()
	if _, err := cli.Get(ctx, mid.Key, clientv3.WithRev(mid.Rev-1)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("get below the compacted revision %d after a kill: %v; want %v", mid.Rev, err, rpctypes.ErrCompacted)
	}
	if _, err := cli.Compact(ctx, mid.Rev-1); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("compact below the compacted revision %d after a kill: %v; want %v", mid.Rev, err, rpctypes.ErrCompacted)
	}
	w := cli.Watch(ctx, mid.Key, clientv3.WithRev(mid.Rev-1))
	select {
	case resp := <-w:
		if resp.CompactRevision != mid.Rev || !resp.Canceled {
			t.Fatalf("watch from below the compacted revision %d: %+v; want canceled with compact revision %d", mid.Rev, resp, mid.Rev)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("watch from below the compacted revision: no answer in 20s")
	}
	if err := rangeAcks(ctx, cli, sorted[len(sorted)/2:]); err != nil {
		t.Fatalf("after compaction at %d and a kill: %v", mid.Rev, err)
	}
	t.Logf("compaction at %d survived a kill; %d acknowledged writes at or above it still read back", mid.Rev, len(sorted)-len(sorted)/2)
}
