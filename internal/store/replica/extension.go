package replica

import (
	"context"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// ProposeExtension replicates one of the store's own entries (a mode change,
// a notice, replayed revisions; mvcc.ExtensionProposer) and returns what its
// local apply returned.
func (r *Replica) ProposeExtension(ctx context.Context, x *mvcc.Extension) (any, error) {
	if r.isLearner.Load() {
		return nil, rpctypes.ErrGRPCNotSupportedForLearner
	}
	id := r.reqIDs.Next()
	data, err := mvcc.EncodeExtension(id, x)
	if err != nil {
		return nil, err
	}
	return r.proposeData(ctx, id, data)
}

// LeaderChanged returns a channel closed at the next change of leader.
func (r *Replica) LeaderChanged() <-chan struct{} { return r.leaderChange() }
