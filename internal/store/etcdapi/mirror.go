package etcdapi

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Mirror decides where requests go while the store mirrors another cluster
// or replays its changes onto one (package mirror). A server without one
// (Config.Mirror nil) serves every request locally, as before.
type Mirror interface {
	// Admit admits one write (or lease call). It waits while the mode holds
	// writes (a cut-over or cut-back), then returns the Forwarder the call
	// goes to, or nil to serve it locally. done must be called once the
	// call is answered: a transition waits for admitted calls to finish.
	Admit(ctx context.Context) (fwd Forwarder, done func(), err error)
	// ReadFence makes a linearizable read of a mirror: it returns once the
	// local state has applied the source's revision as of the call. handled
	// is false when the store does not mirror (use the raft barrier).
	ReadFence(ctx context.Context) (handled bool, err error)
	// SkipCompaction reports whether a local compaction must not run now
	// (while the store's changes are replayed elsewhere from its history).
	SkipCompaction() bool
}

// Forwarder sends writes to the cluster the store mirrors. Each call
// returns once the local state has applied the revision of the answer, so a
// client reads its own writes on the store.
type Forwarder interface {
	Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error)
	DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error)
	Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error)
	Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error)
	LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error)
	LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error)
	// LeaseKeepAlive renews a lease and returns its TTL (mvcc.ErrLeaseNotFound
	// for an unknown lease).
	LeaseKeepAlive(ctx context.Context, id int64) (int64, error)
	LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error)
	LeaseLeases(ctx context.Context, r *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error)
}

func noop() {}

// route admits a write: fwd is nil for the local path. Without a mirror it
// costs one nil check.
func (s *Server) route(ctx context.Context) (Forwarder, func(), error) {
	if s.cfg.Mirror == nil {
		return nil, noop, nil
	}
	fwd, done, err := s.cfg.Mirror.Admit(ctx)
	if err != nil {
		return nil, noop, toGRPC(err)
	}
	return fwd, done, nil
}

// fenced makes a non-serializable read of a mirror linearizable with the
// source; handled is false when the raft barrier applies instead.
func (s *Server) fenced(ctx context.Context) (bool, error) {
	if s.cfg.Mirror == nil {
		return false, nil
	}
	handled, err := s.cfg.Mirror.ReadFence(ctx)
	return handled, toGRPC(err)
}

// txnWrites reports whether a transaction may write (on either branch).
func txnWrites(r *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			switch {
			case op.GetRequestRange() != nil:
			case op.GetRequestTxn() != nil:
				if txnWrites(op.GetRequestTxn()) {
					return true
				}
			default:
				return true
			}
		}
	}
	return false
}
