package etcdapi

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var errSingleMember = status.Error(codes.Unimplemented, "quantykube store is a single member; membership changes are not supported")

// MemberList serves Cluster.MemberList: this member alone.
func (s *Server) MemberList(ctx context.Context, r *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	return &pb.MemberListResponse{
		Header:  s.header(s.store.Rev()),
		Members: []*pb.Member{{ID: s.memberID, Name: s.cfg.Name, ClientURLs: s.cfg.ClientURLs}},
	}, nil
}

// MemberAdd is refused: the store has exactly one member.
func (s *Server) MemberAdd(context.Context, *pb.MemberAddRequest) (*pb.MemberAddResponse, error) {
	return nil, errSingleMember
}

// MemberRemove is refused: the store has exactly one member.
func (s *Server) MemberRemove(context.Context, *pb.MemberRemoveRequest) (*pb.MemberRemoveResponse, error) {
	return nil, errSingleMember
}

// MemberUpdate is refused: the store has exactly one member.
func (s *Server) MemberUpdate(context.Context, *pb.MemberUpdateRequest) (*pb.MemberUpdateResponse, error) {
	return nil, errSingleMember
}

// MemberPromote is refused: the store has exactly one member.
func (s *Server) MemberPromote(context.Context, *pb.MemberPromoteRequest) (*pb.MemberPromoteResponse, error) {
	return nil, errSingleMember
}
