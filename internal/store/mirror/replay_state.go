package mirror

import (
	"context"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// replayState is a running replay's position and what it knows of leases.
type replayState struct {
	r  *Replayer
	at int64
	// known are the target's leases (a superset: leases revoked by others
	// stay until the next sweep, which only costs a grant that is skipped).
	known map[int64]bool
	ttls  map[int64]int64
	// revokes are leases gone from the source, each revocable on the
	// target once the replay reaches the source revision it was seen gone at.
	revokes []pendingRevoke
}

type pendingRevoke struct {
	id    int64
	after int64
}

// apply replays changes in batches.
func (s *replayState) apply(ctx context.Context, changes []Change) error {
	for len(changes) > 0 {
		n, size := 0, 0
		for n < len(changes) && n < maxBatchRevs && (n == 0 || size+changes[n].size() <= maxBatchBytes) {
			size += changes[n].size()
			n++
		}
		if err := s.applyBatch(ctx, changes[:n]); err != nil {
			return err
		}
		changes = changes[n:]
	}
	return nil
}

func (s *replayState) applyBatch(ctx context.Context, changes []Change) error {
	var b Batch
	next := s.at + 1
	for _, c := range changes {
		switch {
		case c.Rev < next:
			continue // delivered twice
		case c.Rev > next:
			return diverged("%s's revision %d follows %d: the revisions in between are missing from its watch", s.r.Source.Name(), c.Rev, next-1)
		}
		b.Changes = append(b.Changes, c)
		next++
	}
	if len(b.Changes) == 0 {
		return nil
	}
	last := b.Changes[len(b.Changes)-1].Rev
	grants, err := s.grantsFor(ctx, b.Changes)
	if err != nil {
		return err
	}
	b.Grants = grants
	b.Revokes = s.dueRevokes(last)
	rev, err := s.r.Target.Apply(ctx, b)
	if err != nil {
		return err
	}
	if rev != last {
		return diverged("replaying up to revision %d made revision %d on %s", last, rev, s.r.Target.Name())
	}
	s.done(b, rev)
	return nil
}

func (s *replayState) done(b Batch, rev int64) {
	for _, g := range b.Grants {
		s.known[g.ID] = true
	}
	for _, id := range b.Revokes {
		delete(s.known, id)
	}
	s.at = rev
	s.r.Progress.TargetRevision.Store(rev)
}

// grantsFor returns the grants the changes' puts need, with the source's
// TTLs.
func (s *replayState) grantsFor(ctx context.Context, changes []Change) ([]mvcc.LeaseGrant, error) {
	var out []mvcc.LeaseGrant
	seen := map[int64]bool{}
	for _, c := range changes {
		for _, id := range c.leases() {
			if s.known[id] || seen[id] {
				continue
			}
			seen[id] = true
			ttl, err := s.sourceTTL(ctx, id)
			if err != nil {
				return nil, err
			}
			out = append(out, mvcc.LeaseGrant{ID: id, TTL: ttl})
		}
	}
	return out, nil
}

func (s *replayState) sourceTTL(ctx context.Context, id int64) (int64, error) {
	if ttl, ok := s.ttls[id]; ok {
		return ttl, nil
	}
	ttl, found, err := s.r.Source.LeaseTTL(ctx, id)
	if err != nil {
		return 0, err
	}
	if !found {
		ttl = goneLeaseTTL
	}
	s.ttls[id] = ttl
	return ttl, nil
}

// dueRevokes takes the pending revokes the target can do after rev.
func (s *replayState) dueRevokes(rev int64) []int64 {
	var out []int64
	keep := s.revokes[:0]
	for _, p := range s.revokes {
		if p.after <= rev {
			out = append(out, p.id)
		} else {
			keep = append(keep, p)
		}
	}
	s.revokes = keep
	return out
}
