package mvcc

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// TestRangeCountFromIndexMatchesScan checks that ranges answered with the
// index's count (limit, count-only, RangeStream with a limit) return exactly
// what the full pebble scan returns, for random ranges and limits.
func TestRangeCountFromIndexMatchesScan(t *testing.T) {
	s := openTest(t, "")
	ctx := context.Background()
	for i := 0; i < 300; i++ {
		put(t, s, fmt.Sprintf("r/%03d", i), fmt.Sprint(i))
		if i%7 == 0 {
			if _, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte(fmt.Sprintf("r/%03d", i/2))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 200; i++ {
		a, b := rng.Intn(320), rng.Intn(320)
		req := &pb.RangeRequest{Key: []byte(fmt.Sprintf("r/%03d", a)), Limit: int64(rng.Intn(20)),
			CountOnly: rng.Intn(4) == 0, KeysOnly: rng.Intn(2) == 0}
		switch rng.Intn(3) {
		case 0:
			req.RangeEnd = []byte(fmt.Sprintf("r/%03d", b))
		case 1:
			req.RangeEnd = []byte{0}
		}
		got, err := s.Range(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		snap, rev, err := s.readView()
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.rangeReader(snap, nil, rev, req)
		snap.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("range %v: index gives %v, scan gives %v", req, got, want)
		}
		if req.CountOnly {
			continue
		}
		var streamed []*mvccpb.KeyValue
		sr, err := s.RangeStream(ctx, req, 3, func(kvs []*mvccpb.KeyValue) error { streamed = append(streamed, kvs...); return nil })
		if err != nil {
			t.Fatal(err)
		}
		streamed = append(streamed, sr.Kvs...)
		if sr.Count != want.Count || sr.More != want.More || len(streamed) != len(want.Kvs) {
			t.Fatalf("RangeStream %v: count %d more %v %d kvs, want %d %v %d", req, sr.Count, sr.More, len(streamed), want.Count, want.More, len(want.Kvs))
		}
	}
}

// TestTxnRangeCountsTheGroupsOwnWrites checks a range inside a write
// transaction, counted from the committer's working index, sees the
// transaction's own earlier put.
func TestTxnRangeCountsTheGroupsOwnWrites(t *testing.T) {
	s := openTest(t, "")
	put(t, s, "t/a", "1")
	r, err := s.Txn(context.Background(), &pb.TxnRequest{Success: []*pb.RequestOp{
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("t/b"), Value: []byte("2")}}},
		{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("t/"), RangeEnd: []byte("t0"), Limit: 1}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rr := r.Responses[1].GetResponseRange()
	if rr.Count != 2 || !rr.More || len(rr.Kvs) != 1 {
		t.Fatalf("range in txn: count %d more %v kvs %d, want 2 true 1", rr.Count, rr.More, len(rr.Kvs))
	}
}
