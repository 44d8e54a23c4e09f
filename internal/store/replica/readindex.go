package replica

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/raft/v3"
)

// readIndexRetry is how often a read index request is sent again when its
// answer was lost (a message dropped, a leader changed), as etcd.
const readIndexRetry = 500 * time.Millisecond

// readIndexer serves linearizable reads as etcd does: the reads waiting at
// one moment share one raft ReadIndex round; once the leader has confirmed
// its leadership with a quorum and the local apply has reached the index it
// returned, they all read locally.
type readIndexer struct {
	r      *Replica
	mu     sync.RWMutex
	cur    *notifier
	wake   chan struct{}
	states chan raft.ReadState
	seq    atomic.Uint64
}

type notifier struct {
	c   chan struct{}
	err error
}

func newNotifier() *notifier { return &notifier{c: make(chan struct{})} }

func (n *notifier) notify(err error) {
	n.err = err
	close(n.c)
}

func newReadIndexer(r *Replica) *readIndexer {
	return &readIndexer{r: r, cur: newNotifier(), wake: make(chan struct{}, 1), states: make(chan raft.ReadState, 64)}
}

// ReadBarrier returns once a read served locally now is linearizable: every
// write acknowledged before the call is applied here. A member without a
// quorum gets etcd's no-leader or timeout error instead, never stale data.
func (r *Replica) ReadBarrier(ctx context.Context) error {
	x := r.reads
	x.mu.RLock()
	n := x.cur
	x.mu.RUnlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
	select {
	case <-n.c:
		return n.err
	case <-ctx.Done():
		return ctx.Err()
	case <-r.stopc:
		return rpctypes.ErrGRPCStopped
	}
}

func (x *readIndexer) deliver(rs []raft.ReadState) {
	for _, s := range rs {
		select {
		case x.states <- s:
		default: // nobody waits for it any more
		}
	}
}

func (x *readIndexer) loop() {
	for {
		select {
		case <-x.wake:
		case <-x.r.stopc:
			return
		}
		next := newNotifier()
		x.mu.Lock()
		n := x.cur
		x.cur = next
		x.mu.Unlock()
		index, err := x.readIndex()
		if err == nil {
			err = x.waitApplied(index)
		}
		n.notify(err)
	}
}

// readIndex asks raft for the commit index a linearizable read must wait for.
func (x *readIndexer) readIndex() (uint64, error) {
	r := x.r
	id := x.seq.Add(1)
	rctx := binary.BigEndian.AppendUint64(nil, id)
	timeout := time.NewTimer(r.requestTimeout())
	defer timeout.Stop()
	retry := time.NewTicker(readIndexRetry)
	defer retry.Stop()
	noLeaderSince := time.Time{}
	changed := r.leaderChange()
	for {
		if r.lead.Load() == raft.None {
			if noLeaderSince.IsZero() {
				noLeaderSince = time.Now()
			} else if time.Since(noLeaderSince) > r.cfg.ElectionTimeout {
				return 0, rpctypes.ErrGRPCNoLeader
			}
		} else if err := r.node.ReadIndex(context.Background(), rctx); err != nil {
			return 0, rpctypes.ErrGRPCStopped
		}
		select {
		case s := <-x.states:
			if len(s.RequestCtx) == 8 && binary.BigEndian.Uint64(s.RequestCtx) == id {
				return s.Index, nil
			}
		case <-retry.C:
		case <-changed:
			return 0, rpctypes.ErrGRPCLeaderChanged
		case <-timeout.C:
			return 0, rpctypes.ErrGRPCTimeout
		case <-r.stopc:
			return 0, rpctypes.ErrGRPCStopped
		}
	}
}

func (x *readIndexer) waitApplied(index uint64) error {
	r := x.r
	if r.applied.Load() >= index {
		return nil
	}
	timeout := time.NewTimer(r.requestTimeout())
	defer timeout.Stop()
	select {
	case <-r.applyWait.Wait(index):
		return nil
	case <-timeout.C:
		return rpctypes.ErrGRPCTimeoutWaitAppliedIndex
	case <-r.stopc:
		return rpctypes.ErrGRPCStopped
	}
}
