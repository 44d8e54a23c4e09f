package mvcc

import (
	"context"
	"sync"
	"sync/atomic"
)

// revWaiters wakes goroutines waiting for the store to reach a revision.
// trigger costs one atomic load while nobody waits, so the commit path of a
// store that never mirrors is unchanged.
type revWaiters struct {
	n  atomic.Int32
	mu sync.Mutex
	ws map[chan struct{}]int64
}

func (r *revWaiters) add(rev int64) chan struct{} {
	ch := make(chan struct{})
	r.mu.Lock()
	if r.ws == nil {
		r.ws = map[chan struct{}]int64{}
	}
	r.ws[ch] = rev
	r.n.Add(1)
	r.mu.Unlock()
	return ch
}

func (r *revWaiters) remove(ch chan struct{}) {
	r.mu.Lock()
	if _, ok := r.ws[ch]; ok {
		delete(r.ws, ch)
		r.n.Add(-1)
	}
	r.mu.Unlock()
}

// trigger wakes every waiter for a revision at or below rev.
func (r *revWaiters) trigger(rev int64) {
	if r.n.Load() == 0 {
		return
	}
	r.mu.Lock()
	for ch, want := range r.ws {
		if want <= rev {
			close(ch)
			delete(r.ws, ch)
			r.n.Add(-1)
		}
	}
	r.mu.Unlock()
}

// WaitRev returns once the store's revision is at least rev (its changes are
// readable and their events handed to the watchers), or ctx ends.
func (s *Store) WaitRev(ctx context.Context, rev int64) error {
	if s.Rev() >= rev {
		return nil
	}
	ch := s.ext.revs.add(rev)
	defer s.ext.revs.remove(ch)
	if s.Rev() >= rev { // published between the check and add
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stopc:
		return ErrClosed
	}
}
