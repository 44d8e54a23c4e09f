package mvcc

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// writeRequest is one request for the committer. apply evaluates it against
// the group's batch and returns the response; it must validate everything
// that can fail before it writes, because a batch cannot be rolled back
// partially.
type writeRequest struct {
	// apply evaluates the request; when nil, kv is the request.
	apply func(w *writeTxn) (any, error)
	kv    kvRequest
	resp  any
	err   error
	done  chan struct{}
}

// kvRequest is a put, a delete or a transaction: exactly one field is set.
// The committer takes these as they are, with no InternalRaftRequest (296
// bytes) and no closure made for each: a write's garbage is what paces the
// GC (ADR 013).
type kvRequest struct {
	put *pb.PutRequest
	del *pb.DeleteRangeRequest
	txn *pb.TxnRequest
}

// raft is r as the replication layer carries it.
func (r kvRequest) raft() *pb.InternalRaftRequest {
	return &pb.InternalRaftRequest{Put: r.put, DeleteRange: r.del, Txn: r.txn}
}

// run evaluates the request against w.
func (req *writeRequest) run(w *writeTxn) (any, error) {
	if req.apply != nil {
		return req.apply(w)
	}
	return w.applyKV(req.kv)
}

// submit runs one write request: proposed through the replication layer when
// the store is a replicated member (every member applies it with
// ApplyEntries), or evaluated by the local committer otherwise. Both paths
// evaluate it with writeTxn.applyRequest (submitKV's requests with applyKV,
// which applyRequest uses for them), so their semantics are identical.
func (s *Store) submit(ctx context.Context, req *pb.InternalRaftRequest) (any, error) {
	s.noteWrite()
	if p := s.proposer.Load(); p != nil {
		return (*p).Propose(ctx, req)
	}
	return s.enqueue(ctx, &writeRequest{apply: func(w *writeTxn) (any, error) { return w.applyRequest(req) }, done: make(chan struct{})})
}

// submitKV is submit for a put, a delete or a transaction; the committer
// evaluates it with writeTxn.applyKV, which applyRequest uses for the same
// requests.
func (s *Store) submitKV(ctx context.Context, kv kvRequest) (any, error) {
	s.noteWrite()
	if p := s.proposer.Load(); p != nil {
		return (*p).Propose(ctx, kv.raft())
	}
	return s.enqueue(ctx, &writeRequest{kv: kv, done: make(chan struct{})})
}

// write hands fn to the committer and waits until its group is durable.
// Only a single (unreplicated) store has a committer: a replicated member
// refuses local-only writes (imports) with ErrReplicated.
func (s *Store) write(ctx context.Context, fn func(w *writeTxn) (any, error)) (any, error) {
	return s.enqueue(ctx, &writeRequest{apply: fn, done: make(chan struct{})})
}

// enqueue is write for a request made already.
func (s *Store) enqueue(ctx context.Context, req *writeRequest) (any, error) {
	if s.opts.Replicated {
		return nil, ErrReplicated
	}
	if errp := s.failed.Load(); errp != nil {
		return nil, *errp
	}
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

// maxGroupBytes bounds the size of one group's batch: a group stops taking
// requests once its batch is that large.
const maxGroupBytes = 32 << 20

// commitLoop is the single writer. It waits for a request, then keeps taking
// whatever else is queued (up to MaxBatch requests or maxGroupBytes),
// evaluating each in order against one indexed batch, commits the batch with
// one fsync, and only then publishes the revision and the events.
func (s *Store) commitLoop() {
	defer close(s.donec)
	group := make([]*writeRequest, 0, s.opts.MaxBatch)
	for {
		var first *writeRequest
		select {
		case first = <-s.queue:
		case <-s.stopc:
			s.drain()
			return
		}
		g := s.newGroup()
		group = append(group[:0], first)
		g.apply(first)
	fill:
		for len(group) < s.opts.MaxBatch && g.w.b.Len() < maxGroupBytes {
			select {
			case req := <-s.queue:
				group = append(group, req)
				g.apply(req)
			default:
				break fill
			}
		}
		s.commitGroup(g, group)
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

// group is one batch of requests being evaluated.
type group struct {
	w        *writeTxn
	startRev int64
	events   []Event
	failed   error
}

func (s *Store) newGroup() *group {
	rev := s.rev.Load()
	g := &group{startRev: rev, w: &writeTxn{s: s, b: s.db.NewIndexedBatch(), rev: rev}}
	if errp := s.failed.Load(); errp != nil {
		g.failed = *errp
	}
	return g
}

func (g *group) apply(req *writeRequest) {
	if g.failed != nil {
		req.err = g.failed
		return
	}
	g.w.begin()
	req.resp, req.err = req.run(g.w)
	if g.w.changes > 0 {
		g.events = append(g.events, g.w.events...)
	}
}

func (s *Store) commitGroup(g *group, reqs []*writeRequest) {
	w, batch := g.w, g.w.b
	defer batch.Close()
	if g.failed == nil {
		if w.rev != g.startRev {
			_ = batch.Set(metaRev, putInt64(w.rev), nil)
		}
		s.beginCommit()
		if !batch.Empty() {
			opts := pebble.Sync
			if s.opts.NoSync || s.opts.Replicated {
				// Replicated: the raft WAL was synced before the entries
				// were committed; a restart replays it from m/applied.
				opts = pebble.NoSync
			}
			if err := commitBatch(batch, opts); err != nil {
				err = fmt.Errorf("%w: commit: %v", ErrFailed, err)
				s.failed.Store(&err)
				s.log.Error("commit failed; refusing further writes", "err", err)
				s.endCommit()
				for _, req := range reqs {
					req.resp, req.err = nil, err
					close(req.done)
				}
				return
			}
		}
		if s.afterBatchCommit != nil {
			s.afterBatchCommit()
		}
		// The batch is durable and visible: publish the index at its
		// revision, then the revision, then its events (watchers never see a
		// revision a reader could not read).
		s.idx.publish(w.rev, s.opts.Now())
		s.rev.Store(w.rev)
		s.endCommit()
		s.hub.notify(w.rev, g.events)
		s.ext.revs.trigger(w.rev)
		for _, f := range w.afterCommit {
			f()
		}
	}
	for _, req := range reqs {
		close(req.done)
	}
}

// commitBatch commits b. pebble panics when its WAL cannot be written (a
// full disk): that panic becomes an error here, so the store fails with one
// clear message instead of a crash; pebble is not used afterwards.
func commitBatch(b *pebble.Batch, opts *pebble.WriteOptions) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	return b.Commit(opts)
}
