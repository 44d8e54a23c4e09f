package mirror

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quantyroot/quantykube/internal/store/etcdapi"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

var _ etcdapi.Mirror = (*Controller)(nil)

func noop() {}

// Admit routes one write (etcdapi.Mirror). An owner without a hold answers
// at once (one atomic load: the single-member path is unchanged); under a
// hold it waits for the hold's end; a mirror returns its forwarder. Every
// admitted write but an owner's is counted until done, for the drains.
func (c *Controller) Admit(ctx context.Context) (etcdapi.Forwarder, func(), error) {
	for {
		st := c.state.Load()
		if st.rec.Mode == api.Owner && st.rec.Hold == nil {
			return nil, noop, nil
		}
		if st.rec.Hold != nil {
			select {
			case <-st.released:
				continue
			case <-ctx.Done():
				return nil, noop, ctx.Err()
			}
		}
		c.inflight.Add(1)
		if c.state.Load() != st { // the mode changed between the load and the count
			c.inflight.Add(-1)
			continue
		}
		done := func() { c.inflight.Add(-1) }
		if st.rec.Mode != api.Mirror {
			return nil, done, nil
		}
		if err := st.unusable(); err != nil {
			done()
			return nil, noop, err
		}
		return st.fwd, done, nil
	}
}

// unusable explains why a mirror cannot serve writes or linearizable reads.
func (st *memberState) unusable() error {
	switch {
	case st.rec.Failed != "":
		return status.Error(codes.Unavailable, "the store's mirror stopped: "+st.rec.Failed)
	case st.fwd == nil:
		return status.Error(codes.Unavailable, fmt.Sprintf("this member cannot reach the store's source: %v", st.peerErr))
	}
	return nil
}

// ReadFence makes a mirror's linearizable read wait for the source's
// revision as of the call (etcdapi.Mirror).
func (c *Controller) ReadFence(ctx context.Context) (bool, error) {
	st := c.state.Load()
	if st.rec.Mode != api.Mirror {
		return false, nil
	}
	if err := st.unusable(); err != nil {
		return true, err
	}
	return true, c.fence.wait(ctx)
}

// SkipCompaction reports whether compaction waits: while the store's
// changes are replayed onto a target, the history the replay reads is kept
// (etcdapi.Mirror).
func (c *Controller) SkipCompaction() bool {
	return c.state.Load().rec.Mode == api.ReplayingTo
}
