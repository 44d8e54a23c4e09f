package mvcc

import (
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// hub delivers committed events to watchers.
//
// A watcher is either synced — it has been sent every event up to hub.rev
// and gets new ones from notify, inline with the commit — or unsynced, with
// the next revision it needs in nextRev; syncLoop replays those from the
// event log on disk until it catches up, then moves it to synced under
// hub.mu. Everything a stream is sent goes through its one ordered queue,
// filled under hub.mu, so a progress notification never overtakes an event.
//
// Every field below mu is guarded by it; lock order and ownership: watch.go.
type hub struct {
	s *Store

	mu       sync.Mutex
	rev      int64 // newest revision handed to synced watchers
	synced   map[*watcher]struct{}
	unsynced map[*watcher]struct{}
	// kick wakes the sync loop early (buffered, one pending wake-up).
	kick chan struct{}
	// closed is set when the store closes; nothing reads it yet.
	closed bool
}

func newHub(s *Store) *hub {
	return &hub{s: s, rev: s.Rev(), synced: map[*watcher]struct{}{}, unsynced: map[*watcher]struct{}{}, kick: make(chan struct{}, 1)}
}

func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
}

// notify hands the events of a committed group (revisions up to rev) to the
// synced watchers. Called by the committer only. It never blocks on a
// client: a watcher whose stream's queue is full moves to unsynced and the
// sync loop replays the group to it from disk later.
func (h *hub) notify(rev int64, events []Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	first := h.rev + 1
	h.rev = rev
	if len(events) == 0 || len(h.synced) == 0 {
		for w := range h.synced {
			w.nextRev = max(w.nextRev, rev+1)
		}
		return
	}
	for w := range h.synced {
		var evs []*mvccpb.Event
		var fills []prevFill
		for i := range events {
			if w.wants(&events[i]) {
				evs = append(evs, w.toProto(&events[i], &fills))
			}
		}
		if len(evs) == 0 {
			w.nextRev = max(w.nextRev, rev+1)
			continue
		}
		resp := &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}, WatchId: w.id, Events: evs}
		if !w.stream.pushEvents(queued{resp: resp, w: w, fills: fills}, false) {
			// The client is slow: replay from disk later instead of queueing.
			w.nextRev = max(w.nextRev, first)
			delete(h.synced, w)
			h.unsynced[w] = struct{}{}
			h.kickSync()
			continue
		}
		w.lastSent = time.Now()
		w.nextRev = max(w.nextRev, rev+1)
	}
}

// restored moves every watcher to unsynced after a state snapshot replaced
// the data at revision rev: each catches up from the new event log (or is
// canceled as compacted if its next revision is gone).
func (h *hub) restored(rev int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.synced {
		delete(h.synced, w)
		h.unsynced[w] = struct{}{}
	}
	h.rev = rev
	h.kickSync()
}

// kickSync wakes the sync loop without waiting.
func (h *hub) kickSync() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}
