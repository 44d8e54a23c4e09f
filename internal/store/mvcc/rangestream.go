package mvcc

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// RangeStream serves a range in chunks: send receives consecutive, disjoint
// slices of at most chunk key-values, all read in one pass over one snapshot
// at one revision. The returned response carries what Range would return
// besides the key-values: header revision, count and more. Sorting and
// revision filters are not supported here (callers use Range for them).
func (s *Store) RangeStream(ctx context.Context, req *pb.RangeRequest, chunk int, send func([]*mvccpb.KeyValue) error) (*pb.RangeResponse, error) {
	snap, cur, err := s.readView()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	rev, err := s.checkRev(req.Revision, cur)
	if err != nil {
		return nil, err
	}
	var (
		buf   []*mvccpb.KeyValue
		count int64
		sent  int64
		alloc kvAlloc
	)
	// With a limit at the current revision the index counts the range, and
	// the scan stops at the limit.
	indexed := int64(-1)
	iv := s.idx.viewAt(cur)
	if iv != nil && rev == cur && req.Limit > 0 {
		indexed = iv.count(req.Key, req.RangeEnd)
	}
	emit := func(e *entry) error {
		if req.Limit > 0 && sent+int64(len(buf)) >= req.Limit {
			if indexed >= 0 {
				return errStopScan
			}
			count++
			return nil // past the limit: only counted
		}
		count++
		if e.typ != recordPut {
			return fmt.Errorf("decode %q: %w", e.key, errBadRecord)
		}
		buf = append(buf, alloc.keyValue(e, req.KeysOnly))
		if len(buf) >= chunk {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := send(buf); err != nil {
				return err
			}
			sent += int64(len(buf))
			buf = nil
		}
		return nil
	}
	if rev == cur {
		err = scanLive(snap, iv, req.Key, req.RangeEnd, !req.KeysOnly, emit)
	} else {
		err = scanHistory(snap, req.Key, req.RangeEnd, rev, !req.KeysOnly, emit)
	}
	if errors.Is(err, errStopScan) {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	if indexed >= 0 {
		count = indexed
	}
	resp := &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: cur}, Count: count, Kvs: buf}
	resp.More = count > sent+int64(len(buf))
	return resp, nil
}
