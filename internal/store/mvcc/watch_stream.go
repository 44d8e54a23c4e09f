package mvcc

import (
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// WatchStream is one client stream of watches. Responses come out of Next in
// the order they were produced.
//
// Every field below mu is guarded by it; h and signal are fixed at creation.
// Methods that change the hub's sets take hub.mu first, then mu (watch.go).
type WatchStream struct {
	h *hub
	// signal wakes Next (buffered, one pending wake-up).
	signal chan struct{}

	mu       sync.Mutex
	queue    []queued
	watchers map[int64]*watcher
	nextID   int64
	closed   bool
	// progressPending is set when a progress request could not be answered
	// because a watcher was catching up.
	progressPending bool
}

// NewWatchStream opens a stream of watches.
func (s *Store) NewWatchStream() *WatchStream {
	return &WatchStream{h: s.hub, signal: make(chan struct{}, 1), watchers: map[int64]*watcher{}}
}

// WatchOptions are the options of a watch.
type WatchOptions struct {
	// ID is the client-chosen watch id; 0 lets the stream choose one.
	ID             int64
	Key, End       []byte
	StartRev       int64
	PrevKV         bool
	NoPut          bool
	NoDelete       bool
	ProgressNotify bool
	// Fragment asks for large responses to be split (see WantsFragments).
	Fragment bool
}

// Watch creates a watch and queues its "created" response. A start revision
// below the compacted revision is canceled with the compacted revision right
// after it is created (as etcd does).
func (ws *WatchStream) Watch(o WatchOptions) (int64, error) {
	h := ws.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return 0, ErrClosed
	}
	id := o.ID
	if id == 0 {
		for ws.watchers[ws.nextID] != nil {
			ws.nextID++
		}
		id = ws.nextID
		ws.nextID++
	} else if ws.watchers[id] != nil {
		ws.mu.Unlock()
		return 0, ErrWatchIDInUse
	}
	w := &watcher{
		id: id, key: o.Key, end: o.End, prevKV: o.PrevKV, noPut: o.NoPut, noDelete: o.NoDelete,
		progress: o.ProgressNotify, fragment: o.Fragment, stream: ws, lastSent: time.Now(), startRev: o.StartRev,
	}
	ws.watchers[id] = w
	ws.mu.Unlock()
	ws.push(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: h.rev}, WatchId: id, Created: true}, true)
	if o.StartRev == 0 || o.StartRev > h.rev {
		w.nextRev = max(o.StartRev, h.rev+1)
		h.synced[w] = struct{}{}
		return id, nil
	}
	w.nextRev = o.StartRev
	h.unsynced[w] = struct{}{}
	h.kickSync()
	return id, nil
}

// WantsFragments reports whether watch id asked for fragmented responses.
func (ws *WatchStream) WantsFragments(id int64) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.watchers[id]
	return w != nil && w.fragment
}

// Reply queues a response built by the API layer (a refused create), in
// order with everything else the stream sends.
func (ws *WatchStream) Reply(r *pb.WatchResponse) { ws.push(r, true) }

// Cancel removes a watch and queues its "canceled" response.
func (ws *WatchStream) Cancel(id int64) bool {
	h := ws.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ws.mu.Lock()
	w := ws.watchers[id]
	if w == nil {
		ws.mu.Unlock()
		return false
	}
	delete(ws.watchers, id)
	ws.mu.Unlock()
	delete(h.synced, w)
	delete(h.unsynced, w)
	ws.push(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: h.rev}, WatchId: id, Canceled: true}, true)
	return true
}

// compacted cancels w because the revisions it needs were compacted. Called
// by the sync loop, without hub.mu, after it took w out of unsynced. A
// client's Cancel may have come first (w is no longer the stream's watcher
// of that id, which a new watch may use by now): then it has its answer and
// nothing is sent.
func (ws *WatchStream) compacted(w *watcher, compactRev, rev int64) {
	ws.mu.Lock()
	if ws.watchers[w.id] != w {
		ws.mu.Unlock()
		return
	}
	delete(ws.watchers, w.id)
	ws.mu.Unlock()
	ws.push(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}, WatchId: w.id, Canceled: true,
		CompactRevision: compactRev, CancelReason: ErrCompacted.Error()}, true)
}

// Close removes every watch of the stream.
func (ws *WatchStream) Close() {
	h := ws.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, w := range ws.watchers {
		delete(h.synced, w)
		delete(h.unsynced, w)
	}
	ws.watchers = map[int64]*watcher{}
	ws.closed = true
	ws.queue = nil
}
