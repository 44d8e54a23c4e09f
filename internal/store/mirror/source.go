package mirror

import (
	"context"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// Source is the cluster a replay reads: an etcd cluster (mirror) or the
// local store (replaying-to).
type Source interface {
	Name() string
	// Rev returns the source's current revision, linearizably.
	Rev(ctx context.Context) (int64, error)
	// Watch delivers every change after revision after, in order, grouped
	// by revision; the channel closes when ctx ends or after an error.
	Watch(ctx context.Context, after int64) <-chan WatchResult
	// LeaseTTL returns a lease's granted TTL; found is false for a lease
	// the source does not have (revoked or expired).
	LeaseTTL(ctx context.Context, id int64) (ttl int64, found bool, err error)
	// Leases lists the source's leases (possibly a little behind).
	Leases(ctx context.Context) ([]int64, error)
	Digest(ctx context.Context, rev int64) (Digest, error)
}

// WatchResult is one delivery of a source's watch.
type WatchResult struct {
	Changes []Change
	// Rev is the source's revision when it was sent.
	Rev int64
	Err error
}

// Batch is what the replayer applies on a target at once: grants first, the
// changes in order, then revokes of leases gone from the source (each only
// if no key is attached).
type Batch struct {
	Grants  []mvcc.LeaseGrant
	Changes []Change
	Revokes []int64
}

// Target is the cluster a replay writes: the local store (mirror) or an etcd
// cluster (replaying-to).
type Target interface {
	Name() string
	// Rev returns the target's current revision, linearizably.
	Rev(ctx context.Context) (int64, error)
	// Leases returns the target's leases, possibly a little behind (etcd
	// lists them from whichever member answers, a restored one still
	// catching up included), and keeps each alive.
	Leases(ctx context.Context) (map[int64]bool, error)
	// Keep keeps alive those of ids the target holds (the ones it does not
	// hold are let go at the first renewal).
	Keep(ids []int64)
	// Apply applies b and returns the target's revision after it. An error
	// that isFatal means the target diverged.
	Apply(ctx context.Context, b Batch) (int64, error)
	Digest(ctx context.Context, rev int64) (Digest, error)
	// Close releases what the target holds for one replay run (the
	// renewals of an etcd target's leases outlive it: loop owns them).
	Close()
}
