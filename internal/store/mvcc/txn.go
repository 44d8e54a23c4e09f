package mvcc

import (
	"bytes"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// checkPut validates a put against the state before it runs: ignore_value
// and ignore_lease need an existing key; a lease must be granted.
func (w *writeTxn) checkPut(req *pb.PutRequest) error {
	if len(req.Key) == 0 {
		return ErrEmptyKey
	}
	if (req.IgnoreValue || req.IgnoreLease) && w.liveMeta(req.Key) == nil {
		return ErrKeyNotFound
	}
	if req.Lease != 0 && !req.IgnoreLease && !w.s.lessor.exists(req.Lease) {
		return ErrLeaseNotFound
	}
	return nil
}

func (w *writeTxn) applyPut(req *pb.PutRequest) (*pb.PutResponse, error) {
	// The previous value is read only when the request needs it; the
	// event's is read when a watcher is sent it (event.go).
	prev := w.liveMeta(req.Key)
	if prev != nil && (req.PrevKv || req.IgnoreValue) {
		if err := w.loadValue(prev); err != nil {
			return nil, err
		}
	}
	value, lease := req.Value, req.Lease
	if req.IgnoreValue || req.IgnoreLease {
		if prev == nil {
			return nil, ErrKeyNotFound
		}
		if req.IgnoreValue {
			value = prev.Value
		}
		if req.IgnoreLease {
			lease = prev.Lease
		}
	}
	w.put(append([]byte(nil), req.Key...), value, lease, prev)
	resp := &pb.PutResponse{Header: &pb.ResponseHeader{Revision: w.currentRev()}}
	if req.PrevKv && prev != nil {
		resp.PrevKv = prev
	}
	return resp, nil
}

func (w *writeTxn) applyDelete(req *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	if len(req.Key) == 0 {
		return nil, ErrEmptyKey
	}
	// Values only for prev_kv in the response; the events read theirs lazily.
	kvs, err := w.liveEntries(req.Key, req.RangeEnd, req.PrevKv)
	if err != nil {
		return nil, err
	}
	for _, kv := range kvs {
		w.del(kv)
	}
	resp := &pb.DeleteRangeResponse{Deleted: int64(len(kvs))}
	if req.PrevKv {
		resp.PrevKvs = kvs
	}
	resp.Header = &pb.ResponseHeader{Revision: w.currentRev()}
	return resp, nil
}

// checkTxn validates every put of the chosen branches before anything runs.
func (w *writeTxn) checkTxn(req *pb.TxnRequest, d *decision) error {
	nested := d.nested
	for _, op := range branch(req, d.ok) {
		switch {
		case op.GetRequestPut() != nil:
			if err := w.checkPut(op.GetRequestPut()); err != nil {
				return err
			}
		case op.GetRequestRange() != nil:
			if len(op.GetRequestRange().Key) == 0 {
				return ErrEmptyKey
			}
		case op.GetRequestDeleteRange() != nil:
			if len(op.GetRequestDeleteRange().Key) == 0 {
				return ErrEmptyKey
			}
		case op.GetRequestTxn() != nil:
			if err := w.checkTxn(op.GetRequestTxn(), nested[0]); err != nil {
				return err
			}
			nested = nested[1:]
		}
	}
	return nil
}

func (w *writeTxn) applyTxn(req *pb.TxnRequest, d *decision) (*pb.TxnResponse, error) {
	resp := &pb.TxnResponse{Succeeded: d.ok}
	nested := d.nested
	for _, op := range branch(req, d.ok) {
		var out *pb.ResponseOp
		switch {
		case op.GetRequestRange() != nil:
			r, err := w.s.rangeReader(w.b, w.s.idx.working(w.currentRev()), w.currentRev(), op.GetRequestRange())
			if err != nil {
				return nil, err
			}
			out = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: r}}
		case op.GetRequestPut() != nil:
			r, err := w.applyPut(op.GetRequestPut())
			if err != nil {
				return nil, err
			}
			out = &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: r}}
		case op.GetRequestDeleteRange() != nil:
			r, err := w.applyDelete(op.GetRequestDeleteRange())
			if err != nil {
				return nil, err
			}
			out = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: r}}
		case op.GetRequestTxn() != nil:
			r, err := w.applyTxn(op.GetRequestTxn(), nested[0])
			if err != nil {
				return nil, err
			}
			nested = nested[1:]
			r.Header = &pb.ResponseHeader{Revision: w.currentRev()}
			out = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: r}}
		default:
			continue
		}
		resp.Responses = append(resp.Responses, out)
	}
	// Inner headers carry the transaction's final revision, as etcd's do.
	for _, r := range resp.Responses {
		switch x := r.Response.(type) {
		case *pb.ResponseOp_ResponsePut:
			x.ResponsePut.Header.Revision = w.currentRev()
		case *pb.ResponseOp_ResponseDeleteRange:
			x.ResponseDeleteRange.Header.Revision = w.currentRev()
		}
	}
	return resp, nil
}

// checkTxnIntervals refuses a transaction whose branch writes one key twice:
// two puts of a key, or a put inside a deleted range (etcd's
// ErrDuplicateKey), including the branches of nested transactions. A branch
// of one operation that is not a transaction writes no key twice and is not
// walked (kube-apiserver's transactions: no map allocated per request).
func checkTxnIntervals(req *pb.TxnRequest) error {
	for _, ops := range [][]*pb.RequestOp{req.Success, req.Failure} {
		if len(ops) == 0 || len(ops) == 1 && ops[0].GetRequestTxn() == nil {
			continue
		}
		if _, _, err := branchWrites(ops); err != nil {
			return err
		}
	}
	return nil
}

type keyRange struct{ key, end []byte }

func (r keyRange) contains(k []byte) bool {
	if len(r.end) == 0 {
		return bytes.Equal(r.key, k)
	}
	if bytes.Compare(k, r.key) < 0 {
		return false
	}
	return (len(r.end) == 1 && r.end[0] == 0) || bytes.Compare(k, r.end) < 0
}

// branchWrites collects the puts and deletes of a branch and the union of
// both branches of its nested transactions.
func branchWrites(ops []*pb.RequestOp) (map[string]bool, []keyRange, error) {
	puts := map[string]bool{}
	var dels []keyRange
	for _, op := range ops {
		switch {
		case op.GetRequestPut() != nil:
			k := string(op.GetRequestPut().Key)
			if puts[k] {
				return nil, nil, ErrDuplicateKey
			}
			puts[k] = true
		case op.GetRequestDeleteRange() != nil:
			d := op.GetRequestDeleteRange()
			dels = append(dels, keyRange{d.Key, d.RangeEnd})
		case op.GetRequestTxn() != nil:
			// The two branches exclude each other: check each against this
			// branch's writes so far, then add both.
			t := op.GetRequestTxn()
			addPuts := map[string]bool{}
			var addDels []keyRange
			for _, sub := range [][]*pb.RequestOp{t.Success, t.Failure} {
				p, d, err := branchWrites(sub)
				if err != nil {
					return nil, nil, err
				}
				for k := range p {
					if puts[k] || inRanges(dels, k) {
						return nil, nil, ErrDuplicateKey
					}
					addPuts[k] = true
				}
				for k := range puts {
					if inRanges(d, k) {
						return nil, nil, ErrDuplicateKey
					}
				}
				addDels = append(addDels, d...)
			}
			for k := range addPuts {
				puts[k] = true
			}
			dels = append(dels, addDels...)
		}
	}
	for k := range puts {
		if inRanges(dels, k) {
			return nil, nil, ErrDuplicateKey
		}
	}
	return puts, dels, nil
}

func inRanges(rs []keyRange, k string) bool {
	for _, r := range rs {
		if r.contains([]byte(k)) {
			return true
		}
	}
	return false
}
