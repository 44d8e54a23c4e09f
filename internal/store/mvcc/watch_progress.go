package mvcc

import (
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// RequestProgress queues a progress notification (no events, watch id -1)
// at the current revision once every watcher of the stream is synced.
func (ws *WatchStream) RequestProgress() {
	h := ws.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ws.mu.Lock()
	ws.progressPending = true
	ws.mu.Unlock()
	ws.maybeSendDeferredProgress(h.rev)
}

// maybeSendDeferredProgress answers a pending progress request if every
// watcher is synced. Called with hub.mu held.
func (ws *WatchStream) maybeSendDeferredProgress(rev int64) {
	ws.mu.Lock()
	if !ws.progressPending {
		ws.mu.Unlock()
		return
	}
	for _, w := range ws.watchers {
		if !ws.h.progressable(w, rev) {
			ws.mu.Unlock()
			return
		}
	}
	ws.progressPending = false
	n := len(ws.watchers)
	ws.mu.Unlock()
	if n == 0 {
		return // etcd sends nothing to a stream without watchers
	}
	ws.push(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}, WatchId: ProgressWatchID}, true)
}

// NotifyProgress queues a progress notification for every synced watcher
// that asked for progress_notify and was sent nothing for interval, and
// answers a deferred progress request that can be answered now.
func (ws *WatchStream) NotifyProgress(interval time.Duration) {
	h := ws.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ws.maybeSendDeferredProgress(h.rev)
	ws.mu.Lock()
	var due []*watcher
	now := time.Now()
	for _, w := range ws.watchers {
		if h.progressable(w, h.rev) && w.progress && now.Sub(w.lastSent) >= interval {
			due = append(due, w)
		}
	}
	ws.mu.Unlock()
	for _, w := range due {
		ws.push(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: h.rev}, WatchId: w.id}, true)
		w.lastSent = now
	}
}

// progressable reports whether a progress notification at rev may be sent
// for w: it is synced (every event up to rev was queued) and rev is not
// below its start revision — a member restarted behind the cluster must not
// promise a client resuming at a later revision that nothing below it is
// coming. Called with hub.mu held.
func (h *hub) progressable(w *watcher, rev int64) bool {
	_, ok := h.synced[w]
	return ok && rev >= w.startRev
}
