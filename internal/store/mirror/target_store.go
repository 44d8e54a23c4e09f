package mirror

import (
	"context"
	"errors"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// storeTarget replays into the local store through its own proposals: every
// member applies the same transactions (mvcc.ReplayBatch), each refused
// unless it comes right after the store's revision.
type storeTarget struct {
	st *mvcc.Store
	m  Member
}

func (t *storeTarget) Name() string { return "the store" }

func (t *storeTarget) Rev(ctx context.Context) (int64, error) {
	if err := t.m.ReadBarrier(ctx); err != nil {
		return 0, err
	}
	return t.st.Rev(), nil
}

func (t *storeTarget) Leases(context.Context) (map[int64]bool, error) {
	out := map[int64]bool{}
	for _, id := range t.st.Leases() {
		out[id] = true
	}
	return out, nil
}

func (t *storeTarget) Apply(ctx context.Context, b Batch) (int64, error) {
	mb := &mvcc.ReplayBatch{Grants: b.Grants, Revokes: b.Revokes}
	for _, c := range b.Changes {
		mb.Txns = append(mb.Txns, mvcc.ReplayTxn{Rev: c.Rev, Txn: c.Txn()})
	}
	rev, err := t.st.Replay(ctx, mb)
	if errors.Is(err, mvcc.ErrReplayDiverged) {
		return rev, fatal{err}
	}
	return rev, err
}

func (t *storeTarget) Digest(ctx context.Context, rev int64) (Digest, error) {
	return storeDigest(ctx, t.st, rev)
}

func (t *storeTarget) Keep([]int64) {}

func (t *storeTarget) Close() {}
