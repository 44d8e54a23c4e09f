package mvcc

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Named waits of the slow-watcher tests. They only bound a hang (the machine
// may be loaded); no test asserts how long anything took.
const (
	slowPoll    = 10 * time.Millisecond
	slowTimeout = 2 * time.Minute
)

// slowWrites is how many single-put revisions the tests commit while a
// stream does not read: more than a stream's queue holds, so its watcher
// must fall back to catching up from disk.
const slowWrites = 2*maxQueuedResponses + 200

// writeRevs puts n keys under prefix, one revision each, from the calling
// goroutine, and returns the key written at each revision. That every put
// returns is the writers' half of the contract: a writer never waits on a
// watcher (notify does not block; a full stream's watcher goes unsynced).
func writeRevs(t *testing.T, s *Store, prefix string, n int) map[int64]string {
	t.Helper()
	out := make(map[int64]string, n)
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("%s%05d", prefix, i)
		out[put(t, s, k, k).Header.Revision] = k
	}
	return out
}

// openWatch opens a stream with one watch on prefix from the next revision
// and reads its created response.
func openWatch(t *testing.T, s *Store, prefix string) (*WatchStream, int64) {
	t.Helper()
	ws := s.NewWatchStream()
	t.Cleanup(ws.Close)
	id, err := ws.Watch(WatchOptions{Key: []byte(prefix), End: prefixEnd([]byte(prefix))})
	if err != nil {
		t.Fatal(err)
	}
	if r := nextResponses(t, ws, 1); len(r) != 1 || !r[0].Created {
		t.Fatalf("first response is not created: %v", r)
	}
	return ws, id
}

// watcherState reports the stream's queue length and whether watch id is
// synced, unsynced, or neither (canceled), read under the hub's lock.
func watcherState(ws *WatchStream, id int64) (queued int, synced, unsynced bool) {
	ws.h.mu.Lock()
	defer ws.h.mu.Unlock()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.watchers[id]
	_, synced = ws.h.synced[w]
	_, unsynced = ws.h.unsynced[w]
	return len(ws.queue), synced && w != nil, unsynced && w != nil
}

// readUntil reads ws until done says the responses so far are enough.
func readUntil(t *testing.T, ws *WatchStream, done func([]*pb.WatchResponse) bool) []*pb.WatchResponse {
	t.Helper()
	out, err := readUntilErr(ws, done)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readUntilErr is readUntil for a goroutine other than the test's.
func readUntilErr(ws *WatchStream, done func([]*pb.WatchResponse) bool) ([]*pb.WatchResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), slowTimeout)
	defer cancel()
	var out []*pb.WatchResponse
	for !done(out) {
		rs, err := ws.Next(ctx)
		if err != nil {
			return out, fmt.Errorf("watch: after %d responses: %w", len(out), err)
		}
		out = append(out, rs...)
	}
	return out, nil
}

func eventsOf(rs []*pb.WatchResponse) []*mvccpb.Event {
	var evs []*mvccpb.Event
	for _, r := range rs {
		evs = append(evs, r.Events...)
	}
	return evs
}

// checkInOrder fails unless evs are the puts of want at revisions from, from+1, ...
// — every revision once, in order, with its key — and returns the revision
// after the last one.
func checkInOrder(t *testing.T, evs []*mvccpb.Event, want map[int64]string, from int64) int64 {
	t.Helper()
	for i, ev := range evs {
		rev := from + int64(i)
		if ev.Type != mvccpb.PUT || ev.Kv.ModRevision != rev || string(ev.Kv.Key) != want[rev] {
			t.Fatalf("event %d: %v %q at %d, want a put of %q at %d", i, ev.Type, ev.Kv.Key, ev.Kv.ModRevision, want[rev], rev)
		}
	}
	return from + int64(len(evs))
}

// TestSlowWatcherCatchesUpInOrder: a stream that does not read while
// writers go on holds at most maxQueuedResponses, its watcher falls back to
// unsynced, another stream gets every event meanwhile, and once the slow
// stream reads it gets every event, in order and once, then goes live again.
func TestSlowWatcherCatchesUpInOrder(t *testing.T) {
	s := openTest(t, "")
	slow, slowID := openWatch(t, s, "k/")
	fast, _ := openWatch(t, s, "k/")
	type result struct {
		rs  []*pb.WatchResponse
		err error
	}
	fastDone := make(chan result, 1)
	go func() {
		rs, err := readUntilErr(fast, func(rs []*pb.WatchResponse) bool { return len(eventsOf(rs)) >= slowWrites })
		fastDone <- result{rs, err}
	}()

	from := s.Rev() + 1
	want := writeRevs(t, s, "k/", slowWrites)

	queued, synced, unsynced := watcherState(slow, slowID)
	if queued > maxQueuedResponses || synced || !unsynced {
		t.Fatalf("slow stream: %d queued (bound %d), synced %v, unsynced %v; want at most the bound and unsynced", queued, maxQueuedResponses, synced, unsynced)
	}
	fr := <-fastDone
	if fr.err != nil {
		t.Fatalf("the other stream, while the slow one did not read: %v", fr.err)
	}
	checkInOrder(t, eventsOf(fr.rs), want, from)

	evs := eventsOf(readUntil(t, slow, func(rs []*pb.WatchResponse) bool { return len(eventsOf(rs)) >= slowWrites }))
	if len(evs) != slowWrites {
		t.Fatalf("slow stream: %d events, want %d", len(evs), slowWrites)
	}
	next := checkInOrder(t, evs, want, from)

	err := wait.PollUntilContextTimeout(context.Background(), slowPoll, slowTimeout, true, func(context.Context) (bool, error) {
		_, synced, _ := watcherState(slow, slowID)
		return synced, nil
	})
	if err != nil {
		t.Fatalf("slow watcher never synced again after draining: %v", err)
	}
	put(t, s, "k/live", "x")
	live := eventsOf(nextResponses(t, slow, 1))
	if len(live) != 1 || live[0].Kv.ModRevision != next || string(live[0].Kv.Key) != "k/live" {
		t.Fatalf("live event after catch-up: %v, want k/live at %d", live, next)
	}
}

// TestSlowWatcherCompactedIsCanceled: a slow watcher whose next revision is
// compacted before it catches up is canceled as etcd cancels one (Canceled,
// CompactRevision set to the compacted revision), after the events it was
// already queued, which are in order and start where the watch started.
// Nothing follows the cancel.
func TestSlowWatcherCompactedIsCanceled(t *testing.T) {
	s := openTest(t, "")
	slow, slowID := openWatch(t, s, "k/")
	from := s.Rev() + 1
	want := writeRevs(t, s, "k/", slowWrites)
	if _, _, unsynced := watcherState(slow, slowID); !unsynced {
		t.Fatal("slow watcher is not unsynced after its queue filled")
	}
	compactRev := s.Rev()
	if _, err := s.Compact(context.Background(), compactRev, true); err != nil {
		t.Fatal(err)
	}

	rs := readUntil(t, slow, func(rs []*pb.WatchResponse) bool { return len(rs) > 0 && rs[len(rs)-1].Canceled })
	last := rs[len(rs)-1]
	if last.WatchId != slowID || last.CompactRevision != compactRev || len(last.Events) != 0 {
		t.Fatalf("cancel: %v, want watch %d canceled with compact_revision %d", last, slowID, compactRev)
	}
	evs := eventsOf(rs[:len(rs)-1])
	if next := checkInOrder(t, evs, want, from); next >= compactRev {
		t.Fatalf("got events up to %d, want the cancel before the compacted revision %d", next-1, compactRev)
	}
	if queued, synced, unsynced := watcherState(slow, slowID); queued != 0 || synced || unsynced {
		t.Fatalf("after cancel: %d queued, synced %v, unsynced %v; want nothing left", queued, synced, unsynced)
	}
}
