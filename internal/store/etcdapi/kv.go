package etcdapi

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Range serves KV.Range.
func (s *Server) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if err := checkRange(r); err != nil {
		return nil, err
	}
	if err := s.readBarrier(ctx, r.Serializable); err != nil {
		return nil, err
	}
	resp, err := s.store.Range(ctx, r)
	if err != nil {
		return nil, toGRPC(err)
	}
	resp.Header = s.fill(resp.Header)
	return resp, nil
}

// rangeStreamChunk is the most key-values sent in one RangeStream message.
const rangeStreamChunk = 1000

// RangeStream serves KV.RangeStream: the same result as Range, sent in
// chunks of disjoint key-values read in one pass over one snapshot; header,
// more and count ride on the last message.
func (s *Server) RangeStream(r *pb.RangeRequest, stream grpc.ServerStreamingServer[pb.RangeStreamResponse]) error {
	if err := checkRange(r); err != nil {
		return err
	}
	if r.SortOrder != pb.RangeRequest_NONE && !(r.SortTarget == pb.RangeRequest_KEY && r.SortOrder == pb.RangeRequest_ASCEND) ||
		r.SortTarget != pb.RangeRequest_KEY || r.CountOnly || r.MinModRevision != 0 || r.MaxModRevision != 0 ||
		r.MinCreateRevision != 0 || r.MaxCreateRevision != 0 {
		// Shapes that cannot be streamed in key order: one full Range, one message.
		resp, err := s.Range(stream.Context(), r)
		if err != nil {
			return err
		}
		return stream.Send(&pb.RangeStreamResponse{RangeResponse: resp})
	}
	if err := s.readBarrier(stream.Context(), r.Serializable); err != nil {
		return err
	}
	last, err := s.store.RangeStream(stream.Context(), r, rangeStreamChunk, func(kvs []*mvccpb.KeyValue) error {
		return stream.Send(&pb.RangeStreamResponse{RangeResponse: &pb.RangeResponse{Kvs: kvs}})
	})
	if err != nil {
		return toGRPC(err)
	}
	last.Header = s.fill(last.Header)
	return stream.Send(&pb.RangeStreamResponse{RangeResponse: last})
}

// Put serves KV.Put.
func (s *Server) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	if err := s.checkPut(r); err != nil {
		return nil, err
	}
	fwd, done, err := s.route(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	var resp *pb.PutResponse
	if fwd != nil {
		resp, err = fwd.Put(ctx, r)
	} else {
		resp, err = s.store.Put(ctx, r)
	}
	if err != nil {
		return nil, toGRPC(err)
	}
	resp.Header = s.fill(resp.Header)
	return resp, nil
}

// DeleteRange serves KV.DeleteRange.
func (s *Server) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	if len(r.Key) == 0 {
		return nil, rpctypes.ErrGRPCEmptyKey
	}
	fwd, done, err := s.route(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	var resp *pb.DeleteRangeResponse
	if fwd != nil {
		resp, err = fwd.DeleteRange(ctx, r)
	} else {
		resp, err = s.store.DeleteRange(ctx, r)
	}
	if err != nil {
		return nil, toGRPC(err)
	}
	resp.Header = s.fill(resp.Header)
	return resp, nil
}

// Txn serves KV.Txn.
func (s *Server) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	if err := s.checkTxn(r); err != nil {
		return nil, err
	}
	var fwd Forwarder
	if txnWrites(r) {
		f, done, err := s.route(ctx)
		if err != nil {
			return nil, err
		}
		defer done()
		fwd = f
	}
	var resp *pb.TxnResponse
	var err error
	if fwd != nil {
		resp, err = fwd.Txn(ctx, r)
	} else if err = s.readBarrier(ctx, txnSerializable(r)); err != nil {
		return nil, err
	} else {
		resp, err = s.store.Txn(ctx, r)
	}
	if err != nil {
		return nil, toGRPC(err)
	}
	s.fillTxn(resp)
	return resp, nil
}

func (s *Server) fillTxn(resp *pb.TxnResponse) {
	resp.Header = s.fill(resp.Header)
	for _, op := range resp.Responses {
		switch x := op.Response.(type) {
		case *pb.ResponseOp_ResponseRange:
			x.ResponseRange.Header = s.fill(x.ResponseRange.Header)
		case *pb.ResponseOp_ResponsePut:
			x.ResponsePut.Header = s.fill(x.ResponsePut.Header)
		case *pb.ResponseOp_ResponseDeleteRange:
			x.ResponseDeleteRange.Header = s.fill(x.ResponseDeleteRange.Header)
		case *pb.ResponseOp_ResponseTxn:
			s.fillTxn(x.ResponseTxn)
		}
	}
}

// Compact serves KV.Compact.
func (s *Server) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	fwd, done, err := s.route(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if fwd != nil {
		resp, err := fwd.Compact(ctx, r)
		if err != nil {
			return nil, toGRPC(err)
		}
		resp.Header = s.fill(resp.Header)
		return resp, nil
	}
	if s.cfg.Mirror != nil && s.cfg.Mirror.SkipCompaction() {
		return &pb.CompactionResponse{Header: s.header(s.store.Rev())}, nil
	}
	rev, err := s.store.Compact(ctx, r.Revision, r.Physical)
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.CompactionResponse{Header: s.header(rev)}, nil
}

func checkRange(r *pb.RangeRequest) error {
	if len(r.Key) == 0 {
		return rpctypes.ErrGRPCEmptyKey
	}
	if _, ok := pb.RangeRequest_SortOrder_name[int32(r.SortOrder)]; !ok {
		return rpctypes.ErrGRPCInvalidSortOption
	}
	if _, ok := pb.RangeRequest_SortTarget_name[int32(r.SortTarget)]; !ok {
		return rpctypes.ErrGRPCInvalidSortOption
	}
	return nil
}

func (s *Server) checkPut(r *pb.PutRequest) error {
	if len(r.Key) == 0 {
		return rpctypes.ErrGRPCEmptyKey
	}
	if r.IgnoreValue && len(r.Value) != 0 {
		return rpctypes.ErrGRPCValueProvided
	}
	if r.IgnoreLease && r.Lease != 0 {
		return rpctypes.ErrGRPCLeaseProvided
	}
	if proto.Size(r) > s.cfg.MaxRequestBytes {
		return rpctypes.ErrGRPCRequestTooLarge
	}
	return nil
}

func (s *Server) checkTxn(r *pb.TxnRequest) error {
	if len(r.Compare) > s.cfg.MaxTxnOps || len(r.Success) > s.cfg.MaxTxnOps || len(r.Failure) > s.cfg.MaxTxnOps {
		return rpctypes.ErrGRPCTooManyOps
	}
	if proto.Size(r) > s.cfg.MaxRequestBytes {
		return rpctypes.ErrGRPCRequestTooLarge
	}
	for _, c := range r.Compare {
		if len(c.Key) == 0 {
			return rpctypes.ErrGRPCEmptyKey
		}
	}
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			var err error
			switch {
			case op.GetRequestRange() != nil:
				err = checkRange(op.GetRequestRange())
			case op.GetRequestPut() != nil:
				err = s.checkPut(op.GetRequestPut())
			case op.GetRequestDeleteRange() != nil:
				if len(op.GetRequestDeleteRange().Key) == 0 {
					err = rpctypes.ErrGRPCEmptyKey
				}
			case op.GetRequestTxn() != nil:
				err = s.checkTxn(op.GetRequestTxn())
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// txnSerializable reports whether a transaction may be served locally: a
// read-only one whose ranges all asked for serializable reads (a write goes
// through the log and needs no barrier), as etcd decides.
func txnSerializable(r *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			switch {
			case op.GetRequestRange() != nil:
				if !op.GetRequestRange().Serializable {
					return false
				}
			case op.GetRequestTxn() != nil:
				if !txnSerializable(op.GetRequestTxn()) {
					return false
				}
			default:
				return true // a write: applied in log order, no barrier
			}
		}
	}
	return true
}
