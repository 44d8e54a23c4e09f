package mirror

import (
	"context"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// sweep finds the target's leases the source no longer has. The target's
// list is read before the source's, so a lease the source granted after it
// (and the target got from a forwarded grant) is never taken for gone; each
// one missing is confirmed with the source's TimeToLive, then revoked once
// the replay has passed the source revision read after the confirmation
// (its keys, deleted at or before it, are gone from the target by then).
func (s *replayState) sweep(ctx context.Context) error {
	gone, after, err := s.goneLeases(ctx)
	if err != nil || len(gone) == 0 {
		return err
	}
	for _, id := range gone {
		s.revokes = append(s.revokes, pendingRevoke{id: id, after: after})
	}
	if after > s.at {
		return nil // revoked with the batch that passes it
	}
	return s.applyLeases(ctx, Batch{Revokes: s.dueRevokes(s.at)})
}

// applyLeases applies a batch of grants and revokes only: the target's
// revision must not move.
func (s *replayState) applyLeases(ctx context.Context, b Batch) error {
	if len(b.Grants) == 0 && len(b.Revokes) == 0 {
		return nil
	}
	rev, err := s.r.Target.Apply(ctx, b)
	if err != nil {
		return err
	}
	if rev != s.at {
		return diverged("%s moved from revision %d to %d while only leases were replayed", s.r.Target.Name(), s.at, rev)
	}
	s.done(b, rev)
	return nil
}

// goneLeases returns the target's leases the source has revoked, and the
// source revision their revokes are at or below.
func (s *replayState) goneLeases(ctx context.Context) ([]int64, int64, error) {
	dst, err := s.r.Target.Leases(ctx)
	if err != nil {
		return nil, 0, err
	}
	for id := range dst {
		s.known[id] = true
	}
	src, err := s.r.Source.Leases(ctx)
	if err != nil {
		return nil, 0, err
	}
	has := map[int64]bool{}
	for _, id := range src {
		has[id] = true
	}
	var gone []int64
	for id := range dst {
		if has[id] {
			continue
		}
		if _, found, err := s.r.Source.LeaseTTL(ctx, id); err != nil {
			return nil, 0, err
		} else if !found {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return nil, 0, nil
	}
	after, err := s.r.Source.Rev(ctx)
	return gone, after, err
}

// syncLeases makes the target's leases the source's: grants the ones it
// lacks (same id, the source's TTL) and revokes the ones the source has
// revoked. It runs when a transition has brought the target level.
func (s *replayState) syncLeases(ctx context.Context) error {
	if err := s.sweep(ctx); err != nil {
		return err
	}
	src, err := s.r.Source.Leases(ctx)
	if err != nil {
		return err
	}
	var b Batch
	for _, id := range src {
		if s.known[id] {
			continue
		}
		ttl, found, err := s.r.Source.LeaseTTL(ctx, id)
		if err != nil {
			return err
		}
		if found {
			b.Grants = append(b.Grants, mvcc.LeaseGrant{ID: id, TTL: ttl})
		}
	}
	b.Revokes = s.dueRevokes(s.at)
	return s.applyLeases(ctx, b)
}

// serveLevels answers the level requests the target has reached.
func (s *replayState) serveLevels(ctx context.Context, reqs []LevelRequest) []LevelRequest {
	keep := reqs[:0]
	for _, req := range reqs {
		if s.at < req.Rev {
			keep = append(keep, req)
			continue
		}
		err := s.syncLeases(ctx)
		req.Reply <- LevelReply{Rev: s.at, Err: err}
	}
	return keep
}
