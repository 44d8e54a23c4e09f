package mvcc

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Proposer replicates write requests (package replica). With a proposer set,
// every write is proposed through it and comes back, on every member, as an
// entry of ApplyEntries; Propose returns what the local apply of that entry
// returned.
type Proposer interface {
	Propose(ctx context.Context, req *pb.InternalRaftRequest) (any, error)
	// IsLeader reports whether this member leads: only the leader expires
	// leases.
	IsLeader() bool
}

// SetProposer makes every later write go through p. Set once, before the
// store serves requests.
func (s *Store) SetProposer(p Proposer) { s.proposer.Store(&p) }

// applyRequest evaluates one write request against the group's batch. It is
// deterministic: given the same state and the same request, every member
// computes the same changes, revision and response. Whatever depends on the
// local clock (lease expiry) stays in memory and out of the data hashed and
// compared between members.
func (w *writeTxn) applyRequest(r *pb.InternalRaftRequest) (any, error) {
	switch {
	case r.Put != nil:
		return w.applyKV(kvRequest{put: r.Put})
	case r.DeleteRange != nil:
		return w.applyKV(kvRequest{del: r.DeleteRange})
	case r.Txn != nil:
		return w.applyKV(kvRequest{txn: r.Txn})
	case r.Compaction != nil:
		return w.applyCompaction(r.Compaction)
	case r.LeaseGrant != nil:
		// The response's revision is the store's at the apply (etcd's).
		return w.currentRev(), w.grant(r.LeaseGrant.ID, r.LeaseGrant.TTL)
	case r.LeaseRevoke != nil:
		// The revision after the lease's keys are deleted (raised only if
		// there were any), as etcd answers.
		err := w.revoke(r.LeaseRevoke.ID)
		return w.currentRev(), err
	case r.LeaseCheckpoint != nil:
		for _, c := range r.LeaseCheckpoint.Checkpoints {
			w.s.lessor.renew(c.ID, c.Remaining_TTL)
		}
		return nil, nil
	case r.ClusterMemberAttrSet != nil:
		return nil, w.setMemberAttrs(r.ClusterMemberAttrSet)
	}
	return nil, ErrUnknownRequest
}

// applyKV evaluates a put, a delete or a transaction, for applyRequest and
// for the committer's kvRequests alike.
func (w *writeTxn) applyKV(r kvRequest) (any, error) {
	switch {
	case r.put != nil:
		if err := w.checkPut(r.put); err != nil {
			return nil, err
		}
		return w.applyPut(r.put)
	case r.del != nil:
		return w.applyDelete(r.del)
	case r.txn != nil:
		return w.applyWriteTxn(r.txn)
	}
	return nil, ErrUnknownRequest
}

func (w *writeTxn) applyWriteTxn(req *pb.TxnRequest) (*pb.TxnResponse, error) {
	if err := checkTxnIntervals(req); err != nil {
		return nil, err
	}
	path, err := txnPath(w, req)
	if err != nil {
		return nil, err
	}
	if err := w.checkTxn(req, path); err != nil {
		return nil, err
	}
	r, err := w.applyTxn(req, path)
	if err != nil {
		return nil, err
	}
	r.Header = &pb.ResponseHeader{Revision: w.currentRev()}
	return r, nil
}
