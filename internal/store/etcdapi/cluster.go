package etcdapi

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// RaftStatus is what Status and response headers report about consensus.
type RaftStatus struct {
	Leader, Term, Index, Applied uint64
	IsLearner                    bool
}

// Cluster is the member's replication as the API sees it: package replica
// for a cluster member, singleMember for a store without peers.
type Cluster interface {
	ClusterID() uint64
	MemberID() uint64
	RaftStatus() RaftStatus
	// ReadBarrier returns once a local read is linearizable.
	ReadBarrier(ctx context.Context) error
	Members() ([]*pb.Member, error)
	AddMember(ctx context.Context, peerURLs []string, learner bool) (*pb.Member, error)
	RemoveMember(ctx context.Context, id uint64) error
	PromoteMember(ctx context.Context, id uint64) error
	UpdateMember(ctx context.Context, id uint64, peerURLs []string) error
}

var errSingleMember = status.Error(codes.FailedPrecondition,
	"quantykube store runs as a single member without peers; restart it with --listen-peer-urls, --initial-advertise-peer-urls and --initial-cluster NAME=PEER_URL to grow it with member add")

// singleMember is a store without peers: always its own leader, term 1,
// the revision as raft index; membership changes are refused.
type singleMember struct {
	s *Server
}

func (c singleMember) ClusterID() uint64 { return c.s.clusterID }
func (c singleMember) MemberID() uint64  { return c.s.memberID }
func (c singleMember) RaftStatus() RaftStatus {
	rev := uint64(c.s.store.Rev())
	return RaftStatus{Leader: c.s.memberID, Term: 1, Index: rev, Applied: rev}
}
func (c singleMember) ReadBarrier(context.Context) error { return nil }
func (c singleMember) Members() ([]*pb.Member, error) {
	return []*pb.Member{{ID: c.s.memberID, Name: c.s.cfg.Name, ClientURLs: c.s.cfg.ClientURLs}}, nil
}
func (c singleMember) AddMember(context.Context, []string, bool) (*pb.Member, error) {
	return nil, errSingleMember
}
func (c singleMember) RemoveMember(context.Context, uint64) error           { return errSingleMember }
func (c singleMember) PromoteMember(context.Context, uint64) error          { return errSingleMember }
func (c singleMember) UpdateMember(context.Context, uint64, []string) error { return errSingleMember }

// MemberList serves Cluster.MemberList.
func (s *Server) MemberList(ctx context.Context, r *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	if r.Linearizable {
		if err := s.cluster.ReadBarrier(ctx); err != nil {
			return nil, toGRPC(err)
		}
	}
	ms, err := s.cluster.Members()
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.MemberListResponse{Header: s.header(s.store.Rev()), Members: ms}, nil
}

// MemberAdd serves Cluster.MemberAdd.
func (s *Server) MemberAdd(ctx context.Context, r *pb.MemberAddRequest) (*pb.MemberAddResponse, error) {
	m, err := s.cluster.AddMember(ctx, r.PeerURLs, r.IsLearner)
	if err != nil {
		return nil, toGRPC(err)
	}
	ms, err := s.cluster.Members()
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.MemberAddResponse{Header: s.header(s.store.Rev()), Member: m, Members: ms}, nil
}

// MemberRemove serves Cluster.MemberRemove.
func (s *Server) MemberRemove(ctx context.Context, r *pb.MemberRemoveRequest) (*pb.MemberRemoveResponse, error) {
	if err := s.cluster.RemoveMember(ctx, r.ID); err != nil {
		return nil, toGRPC(err)
	}
	ms, err := s.cluster.Members()
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.MemberRemoveResponse{Header: s.header(s.store.Rev()), Members: ms}, nil
}

// MemberUpdate serves Cluster.MemberUpdate.
func (s *Server) MemberUpdate(ctx context.Context, r *pb.MemberUpdateRequest) (*pb.MemberUpdateResponse, error) {
	if err := s.cluster.UpdateMember(ctx, r.ID, r.PeerURLs); err != nil {
		return nil, toGRPC(err)
	}
	ms, err := s.cluster.Members()
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.MemberUpdateResponse{Header: s.header(s.store.Rev()), Members: ms}, nil
}

// MemberPromote serves Cluster.MemberPromote.
func (s *Server) MemberPromote(ctx context.Context, r *pb.MemberPromoteRequest) (*pb.MemberPromoteResponse, error) {
	if err := s.cluster.PromoteMember(ctx, r.ID); err != nil {
		return nil, toGRPC(err)
	}
	ms, err := s.cluster.Members()
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.MemberPromoteResponse{Header: s.header(s.store.Rev()), Members: ms}, nil
}

// readBarrier makes a non-serializable read linearizable.
func (s *Server) readBarrier(ctx context.Context, serializable bool) error {
	if serializable {
		return nil
	}
	if handled, err := s.fenced(ctx); handled {
		return err
	}
	return toGRPC(s.cluster.ReadBarrier(ctx))
}

// requireLeader refuses a call whose client asked for a leader
// (clientv3.WithRequireLeader) while the member has none, as etcd does.
func (s *Server) requireLeader(ctx context.Context) error {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok || len(md.Get(rpctypes.MetadataRequireLeaderKey)) == 0 || md.Get(rpctypes.MetadataRequireLeaderKey)[0] != rpctypes.MetadataHasLeader {
		return nil
	}
	if s.cluster.RaftStatus().Leader == 0 {
		return rpctypes.ErrGRPCNoLeader
	}
	return nil
}
