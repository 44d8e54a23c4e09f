package mvcc

import (
	"bytes"
	"context"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Put writes one key (etcd PutRequest semantics: ignore_value and
// ignore_lease need the key to exist, a lease must exist, prev_kv returns the
// previous value). It raises the revision by one.
func (s *Store) Put(ctx context.Context, req *pb.PutRequest) (*pb.PutResponse, error) {
	resp, err := s.submitKV(ctx, kvRequest{put: req})
	if err != nil {
		return nil, err
	}
	return resp.(*pb.PutResponse), nil
}

// DeleteRange deletes the keys of a range. The revision rises by one if at
// least one key was deleted, and not at all otherwise.
func (s *Store) DeleteRange(ctx context.Context, req *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	resp, err := s.submitKV(ctx, kvRequest{del: req})
	if err != nil {
		return nil, err
	}
	return resp.(*pb.DeleteRangeResponse), nil
}

// Txn runs an etcd transaction: every compare is evaluated (nested ones too)
// against the state before the transaction, the chosen branch is validated
// as a whole, then its operations run in order, each seeing the previous
// ones. All changes of a transaction share one revision. A transaction
// without writes is served from a snapshot and does not enter the committer.
func (s *Store) Txn(ctx context.Context, req *pb.TxnRequest) (*pb.TxnResponse, error) {
	if err := checkTxnIntervals(req); err != nil {
		return nil, err
	}
	if txnReadOnly(req) {
		snap, rev, err := s.readView()
		if err != nil {
			return nil, err
		}
		defer snap.Close()
		v := &snapView{s: s, r: snap, rev: rev}
		path, err := txnPath(v, req)
		if err != nil {
			return nil, err
		}
		resp, err := s.runReadTxn(v, req, path)
		if err != nil {
			return nil, err
		}
		resp.Header = &pb.ResponseHeader{Revision: rev}
		return resp, nil
	}
	resp, err := s.submitKV(ctx, kvRequest{txn: req})
	if err != nil {
		return nil, err
	}
	return resp.(*pb.TxnResponse), nil
}

// liveView reads the live keyspace of some consistent state for compares:
// the live key-values of [key, end), with their values only when values is
// set.
type liveView interface {
	compareRange(key, end []byte, values bool) ([]*mvccpb.KeyValue, error)
}

type snapView struct {
	s   *Store
	r   pebble.Reader
	rev int64
}

func (v *snapView) compareRange(key, end []byte, values bool) ([]*mvccpb.KeyValue, error) {
	kvs, _, err := v.s.scan(v.r, scanSpec{key: key, end: end, rev: v.rev, cur: v.rev, keysOnly: !values})
	return kvs, err
}

// compareRange reads the index alone unless the compare needs values.
func (w *writeTxn) compareRange(key, end []byte, values bool) ([]*mvccpb.KeyValue, error) {
	return w.liveEntries(key, end, values)
}

// decision is the outcome of a transaction's compares, with the decisions
// of the nested transactions of the chosen branch, in order.
type decision struct {
	ok     bool
	nested []*decision
}

// txnPath evaluates the compares of req and of every nested transaction on
// the chosen branches, before anything is applied (as etcd does).
func txnPath(v liveView, req *pb.TxnRequest) (*decision, error) {
	d := &decision{ok: true}
	for _, c := range req.Compare {
		match, err := compare(v, c)
		if err != nil {
			return nil, err
		}
		if !match {
			d.ok = false
			break
		}
	}
	for _, op := range branch(req, d.ok) {
		if t := op.GetRequestTxn(); t != nil {
			sub, err := txnPath(v, t)
			if err != nil {
				return nil, err
			}
			d.nested = append(d.nested, sub)
		}
	}
	return d, nil
}

func branch(req *pb.TxnRequest, ok bool) []*pb.RequestOp {
	if ok {
		return req.Success
	}
	return req.Failure
}

// compare evaluates one compare against every key of its range; a missing
// key compares as zero revisions, version and lease, and never matches a
// value compare.
func compare(v liveView, c *pb.Compare) (bool, error) {
	kvs, err := v.compareRange(c.Key, c.RangeEnd, c.Target == pb.Compare_VALUE)
	if err != nil {
		return false, err
	}
	if len(kvs) == 0 {
		if c.Target == pb.Compare_VALUE {
			return false, nil
		}
		return compareKV(c, &mvccpb.KeyValue{}), nil
	}
	for _, kv := range kvs {
		if !compareKV(c, kv) {
			return false, nil
		}
	}
	return true, nil
}

func compareKV(c *pb.Compare, kv *mvccpb.KeyValue) bool {
	var r int
	switch c.Target {
	case pb.Compare_VALUE:
		r = bytes.Compare(kv.Value, c.GetValue())
	case pb.Compare_CREATE:
		r = cmpInt(kv.CreateRevision, c.GetCreateRevision())
	case pb.Compare_MOD:
		r = cmpInt(kv.ModRevision, c.GetModRevision())
	case pb.Compare_VERSION:
		r = cmpInt(kv.Version, c.GetVersion())
	case pb.Compare_LEASE:
		r = cmpInt(kv.Lease, c.GetLease())
	}
	switch c.Result {
	case pb.Compare_EQUAL:
		return r == 0
	case pb.Compare_NOT_EQUAL:
		return r != 0
	case pb.Compare_GREATER:
		return r > 0
	case pb.Compare_LESS:
		return r < 0
	}
	return false
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func txnReadOnly(req *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{req.Success, req.Failure} {
		for _, op := range ops {
			switch {
			case op.GetRequestRange() != nil:
			case op.GetRequestTxn() != nil:
				if !txnReadOnly(op.GetRequestTxn()) {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}

func (s *Store) runReadTxn(v *snapView, req *pb.TxnRequest, d *decision) (*pb.TxnResponse, error) {
	resp := &pb.TxnResponse{Succeeded: d.ok}
	nested := d.nested
	for _, op := range branch(req, d.ok) {
		switch {
		case op.GetRequestRange() != nil:
			r, err := s.rangeReader(v.r, s.idx.viewAt(v.rev), v.rev, op.GetRequestRange())
			if err != nil {
				return nil, err
			}
			resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: r}})
		case op.GetRequestTxn() != nil:
			r, err := s.runReadTxn(v, op.GetRequestTxn(), nested[0])
			if err != nil {
				return nil, err
			}
			nested = nested[1:]
			r.Header = &pb.ResponseHeader{Revision: v.rev}
			resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: r}})
		}
	}
	return resp, nil
}
