package etcdapi

import (
	"context"
	"errors"
	"io"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// LeaseGrant serves Lease.LeaseGrant.
func (s *Server) LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	fwd, done, err := s.route(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if fwd != nil {
		resp, err := fwd.LeaseGrant(ctx, r)
		if err != nil {
			return nil, toGRPC(err)
		}
		resp.Header = s.fill(resp.Header)
		return resp, nil
	}
	id, ttl, rev, err := s.store.LeaseGrantRev(ctx, r.ID, r.TTL)
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.LeaseGrantResponse{Header: s.header(rev), ID: id, TTL: ttl}, nil
}

// LeaseRevoke serves Lease.LeaseRevoke: the lease's keys are deleted in one
// revision.
func (s *Server) LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	fwd, done, err := s.route(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if fwd != nil {
		resp, err := fwd.LeaseRevoke(ctx, r)
		if err != nil {
			return nil, toGRPC(err)
		}
		resp.Header = s.fill(resp.Header)
		return resp, nil
	}
	rev, err := s.store.LeaseRevoke(ctx, r.ID)
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.LeaseRevokeResponse{Header: s.header(rev)}, nil
}

// LeaseKeepAlive serves Lease.LeaseKeepAlive: each request renews a lease
// for its full TTL; an unknown lease is answered with TTL 0, as etcd does.
func (s *Server) LeaseKeepAlive(stream grpc.BidiStreamingServer[pb.LeaseKeepAliveRequest, pb.LeaseKeepAliveResponse]) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		ttl, err := s.keepAlive(stream.Context(), req.ID)
		if err != nil && !errors.Is(err, mvcc.ErrLeaseNotFound) {
			return toGRPC(err)
		}
		if err := stream.Send(&pb.LeaseKeepAliveResponse{Header: s.header(s.store.Rev()), ID: req.ID, TTL: ttl}); err != nil {
			return err
		}
	}
}

// LeaseTimeToLive serves Lease.LeaseTimeToLive; an unknown lease is answered
// with TTL -1 (etcdctl prints "already expired"), as etcd does.
func (s *Server) LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	fwd, done, err := s.route(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if fwd != nil {
		resp, err := fwd.LeaseTimeToLive(ctx, r)
		if err != nil {
			return nil, toGRPC(err)
		}
		resp.Header = s.fill(resp.Header)
		return resp, nil
	}
	l, err := s.store.LeaseTimeToLive(r.ID, r.Keys)
	if errors.Is(err, mvcc.ErrLeaseNotFound) {
		return &pb.LeaseTimeToLiveResponse{Header: s.header(s.store.Rev()), ID: r.ID, TTL: -1}, nil
	}
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.LeaseTimeToLiveResponse{
		Header: s.header(s.store.Rev()), ID: r.ID,
		TTL: int64(l.Remaining.Seconds()), GrantedTTL: l.GrantedTTL, Keys: l.Keys,
	}, nil
}

// LeaseLeases serves Lease.LeaseLeases.
func (s *Server) LeaseLeases(ctx context.Context, r *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	fwd, done, err := s.route(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if fwd != nil {
		resp, err := fwd.LeaseLeases(ctx, r)
		if err != nil {
			return nil, toGRPC(err)
		}
		resp.Header = s.fill(resp.Header)
		return resp, nil
	}
	ids := s.store.Leases()
	resp := &pb.LeaseLeasesResponse{Header: s.header(s.store.Rev()), Leases: make([]*pb.LeaseStatus, 0, len(ids))}
	for _, id := range ids {
		resp.Leases = append(resp.Leases, &pb.LeaseStatus{ID: id})
	}
	return resp, nil
}

// keepAlive renews a lease locally or through the mirror's forwarder.
func (s *Server) keepAlive(ctx context.Context, id int64) (int64, error) {
	fwd, done, err := s.route(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	if fwd != nil {
		return fwd.LeaseKeepAlive(ctx, id)
	}
	return s.store.LeaseKeepAlive(ctx, id)
}
