package store

import (
	"context"

	"github.com/quantyroot/quantykube/internal/store/etcdapi"
	"github.com/quantyroot/quantykube/internal/store/replica"
)

// member adapts a replica to the API's view of the cluster.
type member struct{ *replica.Replica }

func (m member) MemberID() uint64 { return m.ID() }

func (m member) RaftStatus() etcdapi.RaftStatus {
	st := m.Status()
	return etcdapi.RaftStatus{Leader: st.Leader, Term: st.Term, Index: st.Index, Applied: st.Applied, IsLearner: st.IsLearner}
}

// waitPublished waits until a member has published itself through the log
// (replica.Published), as etcd serves clients only after its publish: false
// if ctx ended or the member stopped first (Run then stops it and returns
// the member's error).
func waitPublished(ctx context.Context, rep *replica.Replica) bool {
	if rep == nil {
		return true
	}
	select {
	case <-rep.Published():
		return true
	case <-rep.Done():
	case <-ctx.Done():
	}
	return false
}
