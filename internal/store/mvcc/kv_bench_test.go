package mvcc

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// BenchmarkPutParallel measures fsynced puts from many goroutines: the
// committer groups them so they share fsyncs.
func BenchmarkPutParallel(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	val := make([]byte, 1024)
	var n atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb_ *testing.PB) {
		for pb_.Next() {
			i := n.Add(1)
			if _, err := s.Put(context.Background(), &pb.PutRequest{Key: []byte(fmt.Sprintf("/registry/k/%08d", i%10000)), Value: val}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkRangeAll measures a full range over 10,000 live keys.
func BenchmarkRangeAll(b *testing.B) {
	s, err := Open(b.TempDir(), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	val := make([]byte, 1024)
	for i := 0; i < 10000; i++ {
		s.Put(context.Background(), &pb.PutRequest{Key: []byte(fmt.Sprintf("/registry/k/%08d", i)), Value: val})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := s.Range(context.Background(), &pb.RangeRequest{Key: []byte("/registry/"), RangeEnd: []byte("/registry0")})
		if err != nil || len(r.Kvs) != 10000 {
			b.Fatal(err)
		}
	}
}
