package replica

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestRestartReplayDoesNotSnapshotPastRaft restarts a member whose store
// holds far more entries than its last raft snapshot (a kill between an
// apply and the snapshot that would follow it; here: the snapshot count
// lowered across the restart). raft then replays those entries, in several
// Readies, from its in-memory log; a snapshot taken at the store's applied
// index would compact the log from under that replay — raft panicked with
// "requested index is unavailable due to compaction" (CI, stage 1's
// TestClusterKillLeaderFollowerClients: the killed leader had applied
// 10,001 entries past its snapshot). The member must restart, replay and
// serve.
func TestRestartReplayDoesNotSnapshotPastRaft(t *testing.T) {
	ms := newTestCluster(t, 1)
	m := ms[0]
	waitLeader(t, ms)
	m.stop()
	m.cfg.SnapshotCount = 1 << 30 // no snapshot while the entries are written
	m.start(t)
	waitLeader(t, ms)
	ctx := context.Background()
	const puts, writers = 7000, 16
	value := bytes.Repeat([]byte{'v'}, 1024) // several Readies' worth of replay
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < puts; i += writers {
				if _, err := m.store.Put(ctx, &pb.PutRequest{Key: []byte(fmt.Sprintf("k%05d", i)), Value: value}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	rev := m.store.Rev()
	m.stop()
	m.cfg.SnapshotCount = 100
	m.start(t)
	waitLeader(t, ms)
	if err := m.rep.ReadBarrier(ctx); err != nil {
		t.Fatalf("read barrier after the restart: %v", err)
	}
	r, err := m.store.Put(ctx, &pb.PutRequest{Key: []byte("after"), Value: []byte("x")})
	if err != nil || r.Header.Revision != rev+1 {
		t.Fatalf("put after the restart: %v, %v (revision before %d)", r, err, rev)
	}
}
