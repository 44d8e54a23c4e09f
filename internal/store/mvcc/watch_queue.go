package mvcc

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// push queues r. Unless force is set, it refuses when the queue is full
// (maxQueuedResponses): only notify pushes without force, and it moves the
// watcher to unsynced when refused. Forced pushes — created, canceled,
// progress and catch-up responses, the last only while the queue is not
// full — keep a slow stream's queue near that bound. push never blocks.
func (ws *WatchStream) push(r *pb.WatchResponse, force bool) bool {
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return true
	}
	if !force && len(ws.queue) >= maxQueuedResponses {
		ws.mu.Unlock()
		return false
	}
	ws.queue = append(ws.queue, r)
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

// Next returns the queued responses, waiting until there is one.
func (ws *WatchStream) Next(ctx context.Context) ([]*pb.WatchResponse, error) {
	for {
		ws.mu.Lock()
		if len(ws.queue) > 0 {
			out := ws.queue
			ws.queue = nil
			ws.mu.Unlock()
			return out, nil
		}
		closed := ws.closed
		ws.mu.Unlock()
		if closed {
			return nil, ErrClosed
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
