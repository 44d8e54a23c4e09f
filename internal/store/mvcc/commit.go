package mvcc

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// writeRequest is one request for the committer. apply evaluates it against
// the group's batch and returns the response; it must validate everything
// that can fail before it writes, because a batch cannot be rolled back
// partially.
type writeRequest struct {
	apply func(w *writeTxn) (any, error)
	resp  any
	err   error
	done  chan struct{}
}

// Event is one change as watchers see it.
type Event struct {
	Type   mvccpb.Event_EventType
	KV     *mvccpb.KeyValue
	PrevKV *mvccpb.KeyValue
}

// write hands fn to the committer and waits until its group is durable.
func (s *Store) write(ctx context.Context, fn func(w *writeTxn) (any, error)) (any, error) {
	if errp := s.failed.Load(); errp != nil {
		return nil, *errp
	}
	req := &writeRequest{apply: fn, done: make(chan struct{})}
	select {
	case s.queue <- req:
	case <-s.stopc:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// Once queued, the request will be committed (or fail): wait for it even
	// if ctx ends, so the caller never reports a write as lost that happened.
	select {
	case <-req.done:
		return req.resp, req.err
	case <-s.stopc:
		select {
		case <-req.done:
			return req.resp, req.err
		case <-s.donec:
			return nil, ErrClosed
		}
	}
}

// commitLoop is the single writer. It takes every queued request (up to
// MaxBatch), evaluates them in order against one indexed batch, commits the
// batch with one fsync, then publishes the revision and the events.
func (s *Store) commitLoop() {
	defer close(s.donec)
	group := make([]*writeRequest, 0, s.opts.MaxBatch)
	for {
		group = group[:0]
		select {
		case req := <-s.queue:
			group = append(group, req)
		case <-s.stopc:
			s.drain()
			return
		}
	fill:
		for len(group) < s.opts.MaxBatch {
			select {
			case req := <-s.queue:
				group = append(group, req)
			default:
				break fill
			}
		}
		s.commitGroup(group)
	}
}

func (s *Store) drain() {
	for {
		select {
		case req := <-s.queue:
			req.err = ErrClosed
			close(req.done)
		default:
			return
		}
	}
}

func (s *Store) commitGroup(group []*writeRequest) {
	if errp := s.failed.Load(); errp != nil {
		for _, req := range group {
			req.err = *errp
			close(req.done)
		}
		return
	}
	batch := s.db.NewIndexedBatch()
	defer batch.Close()
	startRev := s.rev.Load()
	w := &writeTxn{s: s, b: batch, rev: startRev}
	var events []Event
	for _, req := range group {
		w.begin()
		req.resp, req.err = req.apply(w)
		if w.changes > 0 {
			events = append(events, w.events...)
		}
		w.end()
	}
	if w.rev != startRev {
		_ = batch.Set(metaRev, putInt64(w.rev), nil)
	}
	if !batch.Empty() {
		opts := pebble.Sync
		if s.opts.NoSync {
			opts = pebble.NoSync
		}
		if err := batch.Commit(opts); err != nil {
			err = fmt.Errorf("%w: commit: %v", ErrFailed, err)
			s.failed.Store(&err)
			s.log.Error("commit failed; refusing further writes", "err", err)
			for _, req := range group {
				req.resp, req.err = nil, err
				close(req.done)
			}
			return
		}
	}
	// The batch is durable and visible: publish its revision, then its events
	// (watchers never see a revision that a reader could not read).
	s.rev.Store(w.rev)
	s.hub.notify(w.rev, events)
	for _, f := range w.afterCommit {
		f()
	}
	for _, req := range group {
		close(req.done)
	}
}
