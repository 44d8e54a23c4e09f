package store

import (
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
