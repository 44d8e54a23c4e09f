package etcdapi

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Status serves Maintenance.Status: leader, raft term and indexes come from
// the member's replication (a single member is its own leader at term 1,
// with the revision as index).
func (s *Server) Status(ctx context.Context, r *pb.StatusRequest) (*pb.StatusResponse, error) {
	rev := s.store.Rev()
	total, inUse := s.store.Size()
	rs := s.cluster.RaftStatus()
	resp := &pb.StatusResponse{
		Header:           s.header(rev),
		Version:          Version,
		DbSize:           total,
		DbSizeInUse:      inUse,
		DbSizeQuota:      s.cfg.QuotaBackendBytes,
		Leader:           rs.Leader,
		RaftIndex:        rs.Index,
		RaftTerm:         rs.Term,
		RaftAppliedIndex: rs.Applied,
		IsLearner:        rs.IsLearner,
		StorageVersion:   "3.6.0",
	}
	if rs.Leader == 0 {
		resp.Errors = append(resp.Errors, rpctypes.ErrGRPCNoLeader.Error())
	}
	return resp, nil
}

// Defragment serves Maintenance.Defragment. pebble reclaims space by
// compacting in the background, so there is nothing to stop the world for.
func (s *Server) Defragment(ctx context.Context, r *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	return &pb.DefragmentResponse{Header: s.header(s.store.Rev())}, nil
}

// Alarm serves Maintenance.Alarm: the store raises no alarms.
func (s *Server) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	return &pb.AlarmResponse{Header: s.header(s.store.Rev())}, nil
}

// HashKV serves Maintenance.HashKV: a hash of every key-value at a revision.
func (s *Server) HashKV(ctx context.Context, r *pb.HashKVRequest) (*pb.HashKVResponse, error) {
	d, err := s.store.HashKV(ctx, r.Revision)
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.HashKVResponse{Header: s.header(s.store.Rev()), Hash: d.Hash, CompactRevision: d.Compacted, HashRevision: d.Revision}, nil
}

// Hash serves Maintenance.Hash as the HashKV of the current revision.
func (s *Server) Hash(ctx context.Context, r *pb.HashRequest) (*pb.HashResponse, error) {
	d, err := s.store.HashKV(ctx, 0)
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.HashResponse{Header: s.header(s.store.Rev()), Hash: d.Hash}, nil
}

// MoveLeader has no meaning for a single member.
func (s *Server) MoveLeader(ctx context.Context, r *pb.MoveLeaderRequest) (*pb.MoveLeaderResponse, error) {
	return nil, status.Error(codes.Unimplemented, "quantykube store is a single member; there is no leader to move")
}
