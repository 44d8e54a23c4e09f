package etcdapi

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Range serves KV.Range.
func (s *Server) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if err := checkRange(r); err != nil {
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
// chunks of disjoint key-values; header, more and count ride on the last one.
// Each chunk is read at the revision of the first, so the chunks together
// are one consistent Range.
func (s *Server) RangeStream(r *pb.RangeRequest, stream grpc.ServerStreamingServer[pb.RangeStreamResponse]) error {
	if err := checkRange(r); err != nil {
		return err
	}
	if r.SortOrder != pb.RangeRequest_NONE && !(r.SortTarget == pb.RangeRequest_KEY && r.SortOrder == pb.RangeRequest_ASCEND) ||
		r.SortTarget != pb.RangeRequest_KEY || r.CountOnly || r.MinModRevision != 0 || r.MaxModRevision != 0 ||
		r.MinCreateRevision != 0 || r.MaxCreateRevision != 0 {
		// Shapes that cannot be paged by key: one full Range, one chunk.
		resp, err := s.Range(stream.Context(), r)
		if err != nil {
			return err
		}
		return stream.Send(&pb.RangeStreamResponse{RangeResponse: resp})
	}
	page := proto.Clone(r).(*pb.RangeRequest)
	remaining := r.Limit
	var total int64 = -1
	var rev int64
	var more bool
	for {
		page.Limit = rangeStreamChunk
		if remaining > 0 && remaining < page.Limit {
			page.Limit = remaining
		}
		resp, err := s.store.Range(stream.Context(), page)
		if err != nil {
			return toGRPC(err)
		}
		if total < 0 {
			total, rev = resp.Count, resp.Header.Revision
			if page.Revision == 0 {
				page.Revision = rev
			}
		}
		if remaining > 0 {
			remaining -= int64(len(resp.Kvs))
		}
		done := !resp.More || (r.Limit > 0 && remaining <= 0)
		if done {
			more = resp.More
			return stream.Send(&pb.RangeStreamResponse{RangeResponse: &pb.RangeResponse{
				Header: s.header(rev), Kvs: resp.Kvs, More: more, Count: total,
			}})
		}
		if err := stream.Send(&pb.RangeStreamResponse{RangeResponse: &pb.RangeResponse{Kvs: resp.Kvs}}); err != nil {
			return err
		}
		last := resp.Kvs[len(resp.Kvs)-1].Key
		page.Key = append(append([]byte(nil), last...), 0)
		if len(page.RangeEnd) == 0 {
			return nil // single key: cannot happen with More set
		}
	}
}

// Put serves KV.Put.
func (s *Server) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	if err := s.checkPut(r); err != nil {
		return nil, err
	}
	resp, err := s.store.Put(ctx, r)
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
	resp, err := s.store.DeleteRange(ctx, r)
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
	resp, err := s.store.Txn(ctx, r)
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
