package etcdapi

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"net"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// replyStore fills a store with keys whose values cross the reply's buffer
// sizes (empty, small, and large enough to straddle a 4 KiB, 32 KiB and
// 1 MiB buffer), with leases, deletes and rewrites.
func replyStore(t *testing.T) (*Server, *mvcc.Store, []int64) {
	t.Helper()
	st, err := mvcc.Open(t.TempDir(), mvcc.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	lease, _, err := st.LeaseGrant(ctx, 7, 3600)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(5))
	sizes := []int{0, 1, 100, 1000, 5000, 40000, 300000}
	var revs []int64
	for i := 0; i < 400; i++ {
		v := make([]byte, sizes[rng.Intn(len(sizes))])
		rng.Read(v)
		req := &pb.PutRequest{Key: []byte(fmt.Sprintf("k/%03d", i%250)), Value: v}
		if i%5 == 0 {
			req.Lease = lease
		}
		if _, err := st.Put(ctx, req); err != nil {
			t.Fatal(err)
		}
		if i%9 == 0 {
			if _, err := st.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte(fmt.Sprintf("k/%03d", i/3))}); err != nil {
				t.Fatal(err)
			}
		}
		if i%40 == 0 {
			revs = append(revs, st.Rev())
		}
	}
	return New(st, Config{Name: "test"}), st, revs
}

// TestRangeReplyMarshalsAsProto checks the reply's invariant: its bytes are
// exactly proto.Marshal of the response Range gives, for ranges of every
// shape (limits, keys-only, count-only, past revisions, sorts, filters,
// single keys, empty ranges), and they decode to it.
func TestRangeReplyMarshalsAsProto(t *testing.T) {
	s, _, revs := replyStore(t)
	ctx := context.Background()
	rng := rand.New(rand.NewSource(6))
	for i := 0; i < 300; i++ {
		req := &pb.RangeRequest{Key: []byte(fmt.Sprintf("k/%03d", rng.Intn(260))), Limit: int64(rng.Intn(3) * rng.Intn(60)),
			CountOnly: rng.Intn(8) == 0, KeysOnly: rng.Intn(4) == 0}
		switch rng.Intn(4) {
		case 0:
			req.RangeEnd = []byte(fmt.Sprintf("k/%03d", rng.Intn(260)))
		case 1, 2:
			req.RangeEnd = []byte{0}
		}
		if rng.Intn(3) == 0 {
			req.Revision = revs[rng.Intn(len(revs))]
		}
		switch rng.Intn(8) {
		case 0:
			req.SortTarget = pb.RangeRequest_SortTarget(rng.Intn(5))
			req.SortOrder = pb.RangeRequest_SortOrder(rng.Intn(3))
		case 1:
			req.MinModRevision = revs[rng.Intn(len(revs))]
		}
		want, err := s.Range(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		wantBytes, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		reply, err := s.rangeReply(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		bufs, err := reply.marshal()
		if err != nil {
			t.Fatal(err)
		}
		got := bufs.Materialize()
		bufs.Free()
		if !bytes.Equal(got, wantBytes) {
			var dec pb.RangeResponse
			derr := proto.Unmarshal(got, &dec)
			t.Fatalf("range %v: reply is %d bytes, proto.Marshal %d (decodes to %d kvs, count %d, more %v, err %v; want %d kvs, count %d, more %v)",
				req, len(got), len(wantBytes), len(dec.Kvs), dec.Count, dec.More, derr, len(want.Kvs), want.Count, want.More)
		}
		if _, err := reply.marshal(); err == nil {
			t.Fatal("a reply marshaled twice gave its buffers out again; want an error")
		}
	}
}

// TestRangeOverGRPCUsesReplies checks a real etcd client against the gRPC
// server, with and without read-ahead: a paged
// list of every key, at the first page's revision, returns what the store
// holds (values of up to 300 KB straddling the reply's buffers).
func TestRangeOverGRPCUsesReplies(t *testing.T) {
	plain, st, _ := replyStore(t)
	ahead := New(st, Config{Name: "test", RangeReadAhead: true})
	defer ahead.Stop()
	for _, s := range []*Server{plain, ahead} {
		pagedListOverGRPC(t, s, st)
	}
	if served, _ := ahead.ReadAheadPages(); served == 0 {
		t.Fatal("the server with read-ahead answered no page from a page read ahead")
	}
}

// pagedListOverGRPC serves s on a loopback port and lists every key of st
// through it in pages of 17, as kube-apiserver pages.
func pagedListOverGRPC(t *testing.T, s *Server, st *mvcc.Store) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	s.Register(g)
	go g.Serve(l)
	defer g.Stop()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{l.Addr().String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), MaxCallRecvMsgSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	want, err := st.Range(ctx, &pb.RangeRequest{Key: []byte("k/"), RangeEnd: []byte("k0")})
	if err != nil {
		t.Fatal(err)
	}
	key, rev, n := "k/", int64(0), 0
	for {
		opts := []clientv3.OpOption{clientv3.WithRange("k0"), clientv3.WithLimit(17)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, key, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
			if resp.Count != want.Count || resp.Header.MemberId == 0 {
				t.Fatalf("first page: count %d, member %d; want count %d and the member's id", resp.Count, resp.Header.MemberId, want.Count)
			}
		}
		for _, kv := range resp.Kvs {
			if !proto.Equal(kv, want.Kvs[n]) {
				t.Fatalf("key %d: got %s (mod %d, %d bytes), want %s (mod %d, %d bytes)", n, kv.Key, kv.ModRevision, len(kv.Value),
					want.Kvs[n].Key, want.Kvs[n].ModRevision, len(want.Kvs[n].Value))
			}
			n++
		}
		if !resp.More {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	if n != len(want.Kvs) {
		t.Fatalf("paged list returned %d keys, want %d", n, len(want.Kvs))
	}
}

// TestKVEncoderResetReturnsItsBuffers checks that an encoder reset or freed
// gives back every buffer it took, and starts over empty.
func TestKVEncoderResetReturnsItsBuffers(t *testing.T) {
	pool := &countingPool{BufferPool: mem.DefaultBufferPool()}
	e := kvEncoder{pool: pool}
	for i := 0; i < 100; i++ {
		e.AddKV([]byte(fmt.Sprint(i)), make([]byte, 20000), 1, 2, 3, 0)
	}
	e.Reset()
	if pool.out != 0 {
		t.Fatalf("%d buffers still out after Reset", pool.out)
	}
	e.AddKV([]byte("a"), []byte("b"), 1, 1, 1, 0)
	bufs := e.buffers()
	var dec pb.RangeResponse
	if err := proto.Unmarshal(bufs.Materialize(), &dec); err != nil || len(dec.Kvs) != 1 || string(dec.Kvs[0].Key) != "a" || string(dec.Kvs[0].Value) != "b" {
		t.Fatalf("after Reset and one key-value: decodes to %v (err %v); want that key-value alone", dec.Kvs, err)
	}
	bufs.Free()
	if pool.out != 0 {
		t.Fatalf("%d buffers still out after the reply's buffers were freed", pool.out)
	}
}

type countingPool struct {
	mem.BufferPool
	out int
}

func (p *countingPool) Get(n int) *[]byte { p.out++; return p.BufferPool.Get(n) }
func (p *countingPool) Put(b *[]byte)     { p.out--; p.BufferPool.Put(b) }
