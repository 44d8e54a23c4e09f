package snapshot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// BenchmarkTake snapshots a store of 200,000 keys of ~250 B, once with every
// key above the compacted revision (changes) and once with every key at or
// below it (the base, sorted by revision).
func BenchmarkTake(b *testing.B) {
	for _, compacted := range []bool{false, true} {
		b.Run(fmt.Sprintf("compacted=%v", compacted), func(b *testing.B) {
			s, err := mvcc.Open(b.TempDir(), mvcc.Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			val := []byte(strings.Repeat("v", 230))
			for i := 0; i < 200_000; i += 100 {
				var ops []*pb.RequestOp
				for j := i; j < i+100; j++ {
					ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: fmt.Appendf(nil, "/load/%07d", j), Value: val}}})
				}
				if _, err := s.Txn(ctx, &pb.TxnRequest{Success: ops}); err != nil {
					b.Fatal(err)
				}
			}
			if compacted {
				if _, err := s.Compact(ctx, s.Rev(), true); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				f, err := Take(ctx, s, 1, slog.Default())
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.WriteTo(io.Discard); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}
