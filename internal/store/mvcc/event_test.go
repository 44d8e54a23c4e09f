package mvcc

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestEventPrevKVIsThePreviousEvent writes one key from many clients at once
// (so groups hold several changes of it, each prev in the same batch as its
// successor) with deletes in between, and checks the lazily read prev_kv of
// every event: it is the key-value of the key's previous event, value
// included; a watcher that did not ask for prev_kv gets none.
func TestEventPrevKVIsThePreviousEvent(t *testing.T) {
	s := openTest(t, "")
	ctx := context.Background()
	withPrev := s.NewWatchStream()
	defer withPrev.Close()
	without := s.NewWatchStream()
	defer without.Close()
	if _, err := withPrev.Watch(WatchOptions{Key: []byte("p"), PrevKV: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := without.Watch(WatchOptions{Key: []byte("p")}); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 40
	var wg sync.WaitGroup
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				var err error
				if i%10 == 9 {
					_, err = s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("p")})
				} else {
					_, err = s.Put(ctx, &pb.PutRequest{Key: []byte("p"), Value: []byte(fmt.Sprintf("%d-%d", g, i))})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	rev := s.Rev()
	evs := eventsUntil(t, withPrev, rev)
	var last *mvccpb.KeyValue // the key's key-value before evs[i], nil if absent
	for i, ev := range evs {
		switch {
		case last == nil && ev.PrevKv != nil:
			t.Fatalf("event %d (%v at %d) has prev_kv %v; the key was absent", i, ev.Type, ev.Kv.ModRevision, ev.PrevKv)
		case last != nil && (ev.PrevKv == nil || !bytes.Equal(ev.PrevKv.Value, last.Value) || ev.PrevKv.ModRevision != last.ModRevision || ev.PrevKv.Version != last.Version):
			t.Fatalf("event %d (%v at %d): prev_kv %v, want %v", i, ev.Type, ev.Kv.ModRevision, ev.PrevKv, last)
		}
		last = ev.Kv
		if ev.Type == mvccpb.DELETE {
			last = nil
		}
	}
	for _, ev := range eventsUntil(t, without, rev) {
		if ev.PrevKv != nil {
			t.Fatalf("a watcher without prev_kv got one at %d", ev.Kv.ModRevision)
		}
	}
}

// eventsUntil reads ws's events up to revision rev.
func eventsUntil(t *testing.T, ws *WatchStream, rev int64) []*mvccpb.Event {
	t.Helper()
	var evs []*mvccpb.Event
	for len(evs) == 0 || evs[len(evs)-1].Kv.ModRevision < rev {
		for _, r := range nextResponses(t, ws, 1) {
			evs = append(evs, r.Events...)
		}
	}
	return evs
}

// TestPrevCompactedBeforeSentCancelsTheWatcher queues an event whose
// previous value a compaction then removes before the stream reads it: the
// watcher is canceled with the compacted revision in that event's place
// (etcd's answer to a watcher behind a compaction), not sent an event
// without its prev_kv; other watchers of the stream go on.
func TestPrevCompactedBeforeSentCancelsTheWatcher(t *testing.T) {
	s := openTest(t, "")
	ctx := context.Background()
	ws := s.NewWatchStream()
	defer ws.Close()
	behind, err := ws.Watch(WatchOptions{Key: []byte("c"), PrevKV: true})
	if err != nil {
		t.Fatal(err)
	}
	other, err := ws.Watch(WatchOptions{Key: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	// Puts without prev_kv: the committer reads no previous value, so the
	// event's is read when the stream sends it.
	for _, v := range []string{"1", "2"} {
		if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("c"), Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	r2 := s.Rev() // c@r2's prev is c's entry at r2-1
	if _, err := s.Compact(ctx, r2, true); err != nil {
		t.Fatal(err)
	}
	r3 := put(t, s, "d", "x").Header.Revision
	var got []*pb.WatchResponse
	for len(got) == 0 || got[len(got)-1].Header.Revision < r3 {
		got = append(got, nextResponses(t, ws, 1)...)
	}
	var canceled, dEvents, cEvents int
	for _, r := range got {
		switch {
		case r.WatchId == behind && r.Canceled:
			canceled++
			if r.CompactRevision != r2 {
				t.Fatalf("canceled with compact revision %d, want %d", r.CompactRevision, r2)
			}
		case r.WatchId == behind:
			for _, ev := range r.Events {
				cEvents++
				if ev.Kv.ModRevision == r2 {
					t.Fatalf("the event at %d was sent although its prev_kv is gone: %v", r2, ev)
				}
			}
		case r.WatchId == other:
			dEvents += len(r.Events)
		}
	}
	if canceled != 1 || dEvents != 1 || cEvents != 1 {
		t.Fatalf("canceled %d, c events %d, d events %d; want 1, 1, 1: %v", canceled, cEvents, dEvents, got)
	}
}
