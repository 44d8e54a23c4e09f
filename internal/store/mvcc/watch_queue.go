package mvcc

import (
	"context"
	"errors"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// queued is one response in a stream's queue. Event responses carry their
// watcher and the previous values their events still need: Next fills them
// outside every lock, so neither the committer nor the sync loop reads a
// value for a watcher (event.go).
type queued struct {
	resp  *pb.WatchResponse
	w     *watcher // the watcher of an event response; nil otherwise
	fills []prevFill
}

// prevFill is one event of a queued response whose PrevKv Next sets.
type prevFill struct {
	ev   *mvccpb.Event
	prev *PrevKV
}

// push queues r, a response without events of a watcher's (created,
// canceled, progress, a refused create). See pushEvents for force.
func (ws *WatchStream) push(r *pb.WatchResponse, force bool) bool {
	return ws.pushEvents(queued{resp: r}, force)
}

// pushEvents queues q. Unless force is set, it refuses when the queue is
// full (maxQueuedResponses): only notify pushes without force, and it moves
// the watcher to unsynced when refused. Forced pushes — created, canceled,
// progress and catch-up responses, the last only while the queue is not
// full — keep a slow stream's queue near that bound. It never blocks.
func (ws *WatchStream) pushEvents(q queued, force bool) bool {
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return true
	}
	if !force && len(ws.queue) >= maxQueuedResponses {
		ws.mu.Unlock()
		return false
	}
	ws.queue = append(ws.queue, q)
	ws.mu.Unlock()
	select {
	case ws.signal <- struct{}{}:
	default:
	}
	return true
}

// full reports whether the queue holds maxQueuedResponses or more.
func (ws *WatchStream) full() bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.queue) >= maxQueuedResponses
}

// Next returns the queued responses, waiting until there is one, with every
// previous value their events carry read (see ready).
func (ws *WatchStream) Next(ctx context.Context) ([]*pb.WatchResponse, error) {
	for {
		out, err := ws.Take()
		if err != nil || len(out) > 0 {
			return out, err
		}
		select {
		case <-ws.signal:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ws.h.s.stopc:
			return nil, ErrClosed
		}
	}
}

// Take returns the queued responses without waiting (none: nil), with
// every previous value their events carry read (see ready); ErrClosed once
// the stream is closed. A sender that waits on Ready and calls Take sends an
// event one goroutine hand-off sooner than one that waits in Next.
func (ws *WatchStream) Take() ([]*pb.WatchResponse, error) {
	ws.mu.Lock()
	qs, closed := ws.queue, ws.closed
	ws.queue = nil
	ws.mu.Unlock()
	if len(qs) > 0 {
		return ws.ready(qs)
	}
	if closed {
		return nil, ErrClosed
	}
	return nil, nil
}

// Ready receives when responses may have been queued since the last Take
// (one pending signal); Stopped is closed when the store stops.
func (ws *WatchStream) Ready() <-chan struct{} { return ws.signal }

// Stopped is closed when the store stops: the stream sends nothing more.
func (ws *WatchStream) Stopped() <-chan struct{} { return ws.h.s.stopc }

// ready fills the previous values of qs' events and returns their responses
// in order. A watcher due an event whose previous value was compacted away
// is canceled with the compacted revision in that event's place, as etcd
// cancels a watcher that fell behind a compaction; its later responses are
// dropped.
func (ws *WatchStream) ready(qs []queued) ([]*pb.WatchResponse, error) {
	s := ws.h.s
	out := make([]*pb.WatchResponse, 0, len(qs))
	for _, q := range qs {
		if q.w != nil && q.w.dropped.Load() {
			continue
		}
		err := fill(s, q.fills)
		switch {
		case errors.Is(err, errPrevCompacted):
			if r := ws.cancelBehind(q.w, q.resp.Header.GetRevision()); r != nil {
				out = append(out, r)
			}
		case err != nil:
			return nil, err
		default:
			out = append(out, q.resp)
		}
	}
	return out, nil
}

// fill sets the PrevKv of every event of fills.
func fill(s *Store, fills []prevFill) error {
	for _, f := range fills {
		kv, err := f.prev.load(s)
		if err != nil {
			return err
		}
		f.ev.PrevKv = kv
	}
	return nil
}

// cancelBehind cancels w, which is due an event whose previous value was
// compacted away, and returns the canceled response to send in the event's
// place; nil if the client canceled w meanwhile (it has its answer).
func (ws *WatchStream) cancelBehind(w *watcher, rev int64) *pb.WatchResponse {
	h := ws.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.dropped.Store(true)
	delete(h.synced, w)
	delete(h.unsynced, w)
	if ws.watchers[w.id] != w {
		return nil
	}
	delete(ws.watchers, w.id)
	return &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}, WatchId: w.id, Canceled: true,
		CompactRevision: h.s.CompactedRev(), CancelReason: ErrCompacted.Error()}
}
