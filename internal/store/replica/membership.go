package replica

import (
	"context"
	"encoding/json"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// Members returns the cluster's members as the state machine holds them.
func (r *Replica) Members() ([]*pb.Member, error) { return r.store.Members() }

// AddMember adds a member (a learner if asked) with etcd's member id scheme,
// through a raft conf change; the new member then starts with
// --initial-cluster-state existing and catches up from a state snapshot.
func (r *Replica) AddMember(ctx context.Context, peerURLs []string, learner bool) (*pb.Member, error) {
	urls, err := types.NewURLs(peerURLs)
	if err != nil {
		return nil, rpctypes.ErrGRPCMemberBadURLs
	}
	ms, err := r.store.Members()
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		for _, u := range m.PeerURLs {
			for _, nu := range urls.StringSlice() {
				if u == nu {
					return nil, rpctypes.ErrGRPCPeerURLExist
				}
			}
		}
	}
	if err := r.mayAddMember(learner); err != nil {
		return nil, err
	}
	em := r.newMemberID(urls)
	em.IsLearner = learner
	typ := raftpb.ConfChangeAddNode
	if learner {
		typ = raftpb.ConfChangeAddLearnerNode
	}
	if err := r.confChange(ctx, typ, em); err != nil {
		return nil, err
	}
	return &pb.Member{ID: uint64(em.ID), PeerURLs: em.PeerURLs, IsLearner: learner}, nil
}

// newMemberID is etcd's member for urls with an id no member has had. etcd's
// id hashes the peer URLs, the cluster token and the time in whole
// seconds, so the same URLs added again within the second their member was
// removed get the removed id, which the cluster refuses for good ("member
// not found": an HA join rolled back, removing the member it added, then
// rerun at once did). A later second gives a fresh id; the id means nothing
// else.
func (r *Replica) newMemberID(urls types.URLs) *membership.Member {
	now := time.Now()
	for {
		em := membership.NewMember("", urls, r.cfg.InitialClusterToken, &now)
		if id := uint64(em.ID); !r.store.IsRemoved(id) && r.member(id) == nil {
			return em
		}
		now = now.Add(time.Second)
	}
}

// RemoveMember removes a member for good.
func (r *Replica) RemoveMember(ctx context.Context, id uint64) error {
	if r.member(id) == nil {
		return rpctypes.ErrGRPCMemberNotFound
	}
	if err := r.mayRemoveMember(id); err != nil {
		return err
	}
	return r.confChange(ctx, raftpb.ConfChangeRemoveNode, &membership.Member{ID: types.ID(id)})
}

// PromoteMember makes a learner a voter once it has caught up with the
// leader (etcd's rule: its log within 10 % of the leader's). Only the
// leader knows how far a learner is: a follower forwards the request to the
// leader's peer URL (etcd's promoteMemberHTTP) and waits until it has
// applied the promotion itself.
func (r *Replica) PromoteMember(ctx context.Context, id uint64) error {
	m := r.member(id)
	if m == nil {
		return rpctypes.ErrGRPCMemberNotFound
	}
	if !m.IsLearner {
		return rpctypes.ErrGRPCMemberNotLearner
	}
	if !r.IsLeader() {
		if err := r.forwardPromote(ctx, id); err != nil {
			return err
		}
		return r.ReadBarrier(ctx)
	}
	return r.promoteAsLeader(ctx, m)
}

// promoteAsLeader promotes learner m; on a member that does not lead it
// answers ErrGRPCNotLeader.
func (r *Replica) promoteAsLeader(ctx context.Context, m *pb.Member) error {
	if !r.IsLeader() {
		return rpctypes.ErrGRPCNotLeader
	}
	st := r.node.Status()
	pr, ok := st.Progress[m.ID]
	if !ok || float64(pr.Match) < 0.9*float64(st.Progress[r.id].Match) {
		return rpctypes.ErrGRPCLearnerNotReady
	}
	if err := r.mayPromoteMember(); err != nil {
		return err
	}
	em := toEtcdMember(m)
	em.IsLearner = false
	return r.confChange(ctx, raftpb.ConfChangeAddNode, em)
}

// UpdateMember changes a member's peer URLs.
func (r *Replica) UpdateMember(ctx context.Context, id uint64, peerURLs []string) error {
	urls, err := types.NewURLs(peerURLs)
	if err != nil {
		return rpctypes.ErrGRPCMemberBadURLs
	}
	m := r.member(id)
	if m == nil {
		return rpctypes.ErrGRPCMemberNotFound
	}
	em := toEtcdMember(m)
	em.PeerURLs = urls.StringSlice()
	return r.confChange(ctx, raftpb.ConfChangeUpdateNode, em)
}

// confChange proposes a conf change and waits until it is applied here.
func (r *Replica) confChange(ctx context.Context, typ raftpb.ConfChangeType, m *membership.Member) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	id := r.reqIDs.Next()
	cc := &raftpb.ConfChange{Id: proto.Uint64(id), Type: typ.Enum(), NodeId: proto.Uint64(uint64(m.ID)), Context: data}
	ch := r.waits.Register(id)
	cctx, cancel := context.WithTimeout(ctx, r.requestTimeout())
	defer cancel()
	if err := r.node.ProposeConfChange(cctx, cc); err != nil {
		r.waits.Trigger(id, nil)
		return r.proposeErr(cctx, err)
	}
	select {
	case x := <-ch:
		if x == nil {
			return rpctypes.ErrGRPCStopped
		}
		return x.(mvcc.Result).Err
	case <-cctx.Done():
		r.waits.Trigger(id, nil)
		return r.proposeErr(cctx, cctx.Err())
	case <-r.stopc:
		return rpctypes.ErrGRPCStopped
	}
}

// publish proposes this member's name and client URLs through the log on
// every start, once it is a member and has a leader, retrying until the
// entry is applied here (etcd's publishV3); then it closes published. The
// member serves clients only after that (etcd's ReadyNotify): having
// applied its own entry, it has applied everything the cluster committed
// before it came back, so a member restarted behind the others never serves
// reads or watches from the past.
func (r *Replica) publish() {
	for {
		if r.member(r.id) != nil && r.lead.Load() != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), r.requestTimeout())
			_, err := r.Propose(ctx, &pb.InternalRaftRequest{ClusterMemberAttrSet: &membershippb.ClusterMemberAttrSetRequest{
				Member_ID: r.id, MemberAttributes: &membershippb.Attributes{Name: r.cfg.Name, ClientUrls: r.cfg.ClientURLs},
			}})
			cancel()
			if err == nil {
				close(r.published)
				return
			}
			r.log.Debug("publish member attributes", "err", err)
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-r.stopc:
			return
		}
	}
}

// Published is closed once this member's attributes, proposed at its
// start, are applied here: the member may serve clients.
func (r *Replica) Published() <-chan struct{} { return r.published }
