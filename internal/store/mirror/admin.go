package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

var _ api.Server = (*Controller)(nil)

func refuse(format string, args ...any) error {
	return status.Error(codes.FailedPrecondition, fmt.Sprintf(format, args...))
}

func invalid(err error) error { return status.Error(codes.InvalidArgument, err.Error()) }

// Start makes the store, which holds exactly the source's state at its
// revision (an etcd snapshot restored with `quantykube store restore`), a
// mirror of the source. Checked first: the store is an owner that never
// mirrored (or already mirrors this source: done), at the requested
// revision, and its digest at that revision is the source's.
func (c *Controller) Start(ctx context.Context, r *api.StartRequest) (*api.Status, error) {
	if err := checkPeer(r.Source, "source"); err != nil {
		return nil, invalid(err)
	}
	st := c.state.Load()
	switch {
	case st.rec.Mode == api.Mirror && samePeer(st.rec.Peer, &r.Source) && st.rec.Failed == "":
		return c.Status(ctx, nil) // done before
	case st.rec.Mode == api.Mirror && st.rec.Failed != "":
		return nil, refuse("the store's mirror failed (%s); it cannot mirror again: discard this store and restore a new snapshot", st.rec.Failed)
	case st.rec.Mode == api.Mirror:
		return nil, refuse("the store already mirrors %v; it cannot mirror another source", st.rec.Peer.Endpoints)
	case st.rec.Mode == api.ReplayingTo:
		return nil, refuse("the store replays onto %v; run `quantykube store mirror cutback` to mirror it instead", st.rec.Peer.Endpoints)
	}
	if err := c.m.ReadBarrier(ctx); err != nil {
		return nil, status.Errorf(codes.Unavailable, "the store cannot read its own state now (%v); retry once it has a leader", err)
	}
	rev := c.st.Rev()
	if r.Revision != 0 && r.Revision != rev {
		return nil, refuse("the store is at revision %d, not %d: it was written after the restore; restore the snapshot again into an empty data dir", rev, r.Revision)
	}
	cli, err := c.client(r.Source, "source")
	if err != nil {
		return nil, invalid(err)
	}
	if err := c.sameState(ctx, &etcdSource{cli: cli, name: "the source"}, rev); err != nil {
		return nil, err
	}
	next := record{Mode: api.Mirror, Peer: &r.Source, Since: rev}
	err = c.st.ChangeMode(ctx, next.change(st.epoch, rev))
	if errors.Is(err, mvcc.ErrModeConflict) || errors.Is(err, mvcc.ErrRevisionMoved) {
		return nil, status.Errorf(codes.Aborted, "the store changed while the mirror was being set up (%v); run the command again", err)
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "record the mirror mode: %v", err)
	}
	c.log.Info("mirror: started", "source", r.Source.Endpoints, "since", rev)
	return c.Status(ctx, nil)
}

// sameState checks that the source holds the store's state at rev.
func (c *Controller) sameState(ctx context.Context, src Source, rev int64) error {
	ds, err := src.Digest(ctx, rev)
	var ce *SourceCompactedError
	if errors.As(err, &ce) {
		return refuse("the source compacted its history past revision %d, where the store is: take a new snapshot of the source and restore it", rev)
	}
	if err != nil {
		return status.Errorf(codes.Unavailable, "read the source at revision %d: %v", rev, err)
	}
	dt, err := storeDigest(ctx, c.st, rev)
	if err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	if ds != dt {
		return refuse("the store does not hold the source's state at revision %d (source: %s; store: %s): restore it from a snapshot of this source", rev, ds, dt)
	}
	return nil
}

// ReplayTo makes an owner replay its changes after r.Revision onto a target
// that holds (or will, once restored from a snapshot taken at r.Revision
// and started) the store's state at that revision. It may be called before
// the target runs: the replay connects as soon as it answers and keeps its
// leases alive from then on.
func (c *Controller) ReplayTo(ctx context.Context, r *api.ReplayToRequest) (*api.Status, error) {
	st := c.state.Load()
	if r.Stop {
		return c.stopReplaying(ctx, st)
	}
	if err := checkPeer(r.Target, "target"); err != nil {
		return nil, invalid(err)
	}
	if r.Revision <= 0 {
		return nil, invalid(errors.New("--revision is missing; pass the revision of the store snapshot the target was restored from"))
	}
	switch {
	case st.rec.Hold != nil:
		return nil, refuse("a %s is in progress; wait for it and run the command again", st.rec.Hold.Op)
	case st.rec.Mode == api.ReplayingTo && samePeer(st.rec.Peer, &r.Target) && st.rec.Since == r.Revision && st.rec.Failed == "":
		return c.Status(ctx, nil)
	case st.rec.Mode == api.Mirror:
		return nil, refuse("the store mirrors %v; run `quantykube store mirror cutover` first", st.rec.Peer.Endpoints)
	case st.rec.Mode == api.ReplayingTo && st.rec.Failed == "":
		return nil, refuse("the store already replays onto %v from revision %d; run `quantykube store mirror replay-to --stop` first", st.rec.Peer.Endpoints, st.rec.Since)
	}
	if err := c.m.ReadBarrier(ctx); err != nil {
		return nil, status.Errorf(codes.Unavailable, "the store cannot read its own state now (%v); retry once it has a leader", err)
	}
	if rev := c.st.Rev(); r.Revision > rev {
		return nil, invalid(fmt.Errorf("--revision %d is ahead of the store (at %d); pass the revision of the store snapshot the target was restored from", r.Revision, rev))
	}
	if comp := c.st.CompactedRev(); r.Revision < comp {
		return nil, refuse("the store compacted its history past revision %d (compacted at %d): take a new snapshot of the store, restore the target from it, and pass its revision", r.Revision, comp)
	}
	if _, err := c.client(r.Target, "target"); err != nil {
		return nil, invalid(err)
	}
	next := record{Mode: api.ReplayingTo, Peer: &r.Target, Since: r.Revision, LastPause: st.rec.LastPause}
	if err := c.st.ChangeMode(ctx, next.change(st.epoch, 0)); err != nil {
		return nil, status.Errorf(codes.Aborted, "record the replaying mode: %v; run the command again", err)
	}
	c.log.Info("mirror: replaying to", "target", r.Target.Endpoints, "since", r.Revision)
	return c.Status(ctx, nil)
}

func (c *Controller) stopReplaying(ctx context.Context, st *memberState) (*api.Status, error) {
	switch {
	case st.rec.Mode == api.Owner:
		return c.Status(ctx, nil)
	case st.rec.Mode != api.ReplayingTo:
		return nil, refuse("the store is in mode %s, not replaying; nothing to stop", st.rec.Mode)
	case st.rec.Hold != nil:
		return nil, refuse("a %s is in progress; wait for it and run the command again", st.rec.Hold.Op)
	}
	next := record{Mode: api.Owner, Since: c.st.Rev(), LastPause: st.rec.LastPause, LastAbort: "replay to " + fmt.Sprint(st.rec.Peer.Endpoints) + " stopped"}
	if err := c.st.ChangeMode(ctx, next.change(st.epoch, 0)); err != nil {
		return nil, status.Errorf(codes.Aborted, "stop replaying: %v; run the command again", err)
	}
	return c.Status(ctx, nil)
}

// Status reports this member's view; the peer's revision is read now.
func (c *Controller) Status(ctx context.Context, _ *api.StatusRequest) (*api.Status, error) {
	st := c.state.Load()
	s := &api.Status{
		Member: types.ID(c.m.ID()).String(), Leader: types.ID(c.m.Leader()).String(), IsLeader: c.m.IsLeader(),
		Mode: st.rec.Mode, Peer: st.rec.Peer, Since: st.rec.Since, Epoch: st.epoch, Hold: st.rec.Hold, Failed: st.rec.Failed,
		AppliedRevision: c.st.Rev(), LastPause: st.rec.LastPause, LastAbort: st.rec.LastAbort,
	}
	if st.rec.Peer != nil {
		role := map[api.Mode]string{api.Mirror: "source", api.ReplayingTo: "target"}[st.rec.Mode]
		if cli, err := c.client(*st.rec.Peer, role); err != nil {
			s.PeerError = err.Error()
		} else {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			rev, err := etcdRev(pctx, cli)
			cancel()
			if err != nil {
				s.PeerError = fmt.Sprintf("cannot read the %s's revision: %v", role, err)
			} else {
				s.PeerRevision = rev
				s.Lag = max(rev-s.AppliedRevision, 0)
				if st.rec.Mode == api.ReplayingTo {
					s.Lag = max(s.AppliedRevision-rev, 0)
				}
			}
		}
	}
	if s.IsLeader && st.rec.replays() {
		s.Replayer = &api.ReplayerStatus{Running: c.progress.Running.Load(), TargetRevision: c.progress.TargetRevision.Load(), LastError: c.progress.LastErr()}
	}
	return s, nil
}
