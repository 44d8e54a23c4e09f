package mvcc

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// drain returns what ws queues within d.
func drain(t *testing.T, ws *WatchStream, d time.Duration) []*pb.WatchResponse {
	t.Helper()
	var out []*pb.WatchResponse
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		rs, err := ws.Next(ctx)
		if err != nil {
			return out
		}
		out = append(out, rs...)
	}
}

// TestProgressNotBelowStartRevision: a watcher that starts at a revision the
// member has not reached (a client resuming on a member restarted behind
// the cluster) is synced, but no progress notification — requested or
// periodic — is sent below its start revision, as etcd's progressIfSync: one
// at revision R promises the client that nothing at or below R is coming.
func TestProgressNotBelowStartRevision(t *testing.T) {
	s := openTest(t, "")
	put(t, s, "a", "1")
	start := s.Rev() + 2
	ws := s.NewWatchStream()
	defer ws.Close()
	if _, err := ws.Watch(WatchOptions{Key: []byte("a"), StartRev: start, ProgressNotify: true}); err != nil {
		t.Fatalf("watch: %v", err)
	}
	ws.RequestProgress()
	ws.NotifyProgress(0)
	for _, r := range drain(t, ws, 200*time.Millisecond) {
		if !r.Created {
			t.Fatalf("at revision %d, below the start revision %d, the stream sent %v", s.Rev(), start, r)
		}
	}
	put(t, s, "b", "2")
	put(t, s, "a", "3") // at start: the watcher's first event
	ws.NotifyProgress(time.Hour)
	got := drain(t, ws, 200*time.Millisecond)
	if len(got) != 2 || len(got[0].Events) != 1 || got[1].WatchId != ProgressWatchID || got[1].Header.Revision != start {
		t.Fatalf("at revision %d the stream sent %v; want the event, then the deferred progress at %d", start, got, start)
	}
}

// TestProgressRequestWithoutWatchers: etcd answers a progress request on a
// stream without watchers with nothing.
func TestProgressRequestWithoutWatchers(t *testing.T) {
	s := openTest(t, "")
	put(t, s, "a", "1")
	ws := s.NewWatchStream()
	defer ws.Close()
	ws.RequestProgress()
	if got := drain(t, ws, 100*time.Millisecond); len(got) != 0 {
		t.Fatalf("a stream without watchers was sent %v", got)
	}
}
