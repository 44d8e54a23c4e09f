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

// recordingSink keeps copies of what it is given.
type recordingSink struct{ kvs []*mvccpb.KeyValue }

func (r *recordingSink) AddKV(key, value []byte, create, mod, version, lease int64) {
	kv := &mvccpb.KeyValue{Key: append([]byte(nil), key...), CreateRevision: create, ModRevision: mod, Version: version, Lease: lease}
	if len(value) > 0 {
		kv.Value = append([]byte(nil), value...)
	}
	r.kvs = append(r.kvs, kv)
}

func (r *recordingSink) Reset() { r.kvs = nil }

// TestRangeToMatchesRange checks that RangeTo gives a sink exactly the
// key-values Range returns, in its order, and the same header, count and
// more: at the current revision and past ones (with changes since, so the
// index-and-changes path answers too), with limits, keys-only, count-only,
// sorted and filtered ranges, single keys and open-ended ones.
func TestRangeToMatchesRange(t *testing.T) {
	s := openTest(t, "")
	ctx := context.Background()
	var revs []int64
	for i := 0; i < 300; i++ {
		put(t, s, fmt.Sprintf("r/%03d", i%200), fmt.Sprint(i))
		if i%7 == 0 {
			if _, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte(fmt.Sprintf("r/%03d", i/2))}); err != nil {
				t.Fatal(err)
			}
		}
		if i%30 == 0 {
			revs = append(revs, s.Rev())
		}
	}
	rng := rand.New(rand.NewSource(3))
	sorts := []pb.RangeRequest_SortTarget{pb.RangeRequest_KEY, pb.RangeRequest_VERSION, pb.RangeRequest_CREATE, pb.RangeRequest_MOD, pb.RangeRequest_VALUE}
	for i := 0; i < 400; i++ {
		a, b := rng.Intn(220), rng.Intn(220)
		req := &pb.RangeRequest{Key: []byte(fmt.Sprintf("r/%03d", a)), Limit: int64(rng.Intn(25)),
			CountOnly: rng.Intn(6) == 0, KeysOnly: rng.Intn(3) == 0}
		switch rng.Intn(4) {
		case 0:
			req.RangeEnd = []byte(fmt.Sprintf("r/%03d", b))
		case 1, 2:
			req.RangeEnd = []byte{0}
		}
		if rng.Intn(2) == 0 {
			req.Revision = revs[rng.Intn(len(revs))]
		}
		switch rng.Intn(6) {
		case 0:
			req.SortTarget = sorts[rng.Intn(len(sorts))]
			req.SortOrder = pb.RangeRequest_SortOrder(rng.Intn(3))
		case 1:
			req.MinModRevision = revs[rng.Intn(len(revs))]
		case 2:
			req.MaxCreateRevision = revs[rng.Intn(len(revs))]
		}
		want, err := s.Range(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var sink recordingSink
		got, err := s.RangeTo(ctx, req, &sink)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Kvs) != 0 {
			t.Fatalf("range %v: RangeTo returned %d key-values in the response; want them in the sink", req, len(got.Kvs))
		}
		got.Kvs = sink.kvs
		if !proto.Equal(got, want) {
			t.Fatalf("range %v:\nRangeTo gives %v\nRange gives   %v", req, got, want)
		}
	}
}
