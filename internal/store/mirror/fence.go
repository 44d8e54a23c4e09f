package mirror

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

// fence serves a mirror's linearizable reads as etcd serves its own with
// ReadIndex: the reads waiting at one moment share one linearizable request
// to the source for its revision, then wait until the local state has
// applied that revision. A read arriving while a request is out waits for
// the next one (the answer might predate it).
type fence struct {
	c    *Controller
	mu   sync.Mutex
	cur  *fenceRound
	wake chan struct{}
}

type fenceRound struct {
	done chan struct{}
	err  error
}

func newFence(c *Controller) *fence {
	return &fence{c: c, cur: &fenceRound{done: make(chan struct{})}, wake: make(chan struct{}, 1)}
}

func (f *fence) wait(ctx context.Context) error {
	f.mu.Lock()
	r := f.cur
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fenceTimeout bounds one round (etcd's request timeout).
const fenceTimeout = 7 * time.Second

func (f *fence) loop(ctx context.Context) {
	for {
		select {
		case <-f.wake:
		case <-ctx.Done():
			return
		}
		f.mu.Lock()
		r := f.cur
		f.cur = &fenceRound{done: make(chan struct{})}
		f.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, fenceTimeout)
		r.err = f.round(rctx)
		cancel()
		close(r.done)
	}
}

func (f *fence) round(ctx context.Context) error {
	st := f.c.state.Load()
	if st.rec.Mode != api.Mirror {
		return f.c.m.ReadBarrier(ctx) // switched meanwhile: the store's own barrier
	}
	if err := st.unusable(); err != nil {
		return err
	}
	rev, err := etcdRev(ctx, st.fwd.cli)
	if err != nil {
		return status.Errorf(codes.Unavailable, "a linearizable read on a mirror needs the source's revision: %v", err)
	}
	return f.c.waitApplied(ctx, rev)
}
