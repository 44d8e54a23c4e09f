package etcdapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// pageBytes marshals a reply and returns its bytes without the header (the
// header is the server's at the time a page is served).
func pageBytes(t *testing.T, reply *rangeReply) []byte {
	t.Helper()
	reply.head.Header = nil
	bufs, err := reply.marshal()
	if err != nil {
		t.Fatal(err)
	}
	defer bufs.Free()
	return bufs.Materialize()
}

// readAheadAlways reads pages ahead whatever the writes for the rest of the
// test (the tests below write right before they list).
func readAheadAlways(t *testing.T) {
	old := aheadQuiet
	t.Cleanup(func() { aheadQuiet = old })
	aheadQuiet = 0
}

// TestPagedListWithReadAheadMatchesReads lists the key space page by page
// as kube-apiserver does (the first page's revision, the key after the
// last), with writes between the pages: every page after the first is
// answered from the page read ahead, and equals a read of that page made
// without it.
func TestPagedListWithReadAheadMatchesReads(t *testing.T) {
	readAheadAlways(t)
	plain, st, _ := replyStore(t)
	s := New(st, Config{Name: "test", RangeReadAhead: true})
	defer s.Stop()
	ctx := context.Background()
	for _, keysOnly := range []bool{false, true} {
		served := s.ahead.served.Load()
		req := &pb.RangeRequest{Key: []byte("k/"), RangeEnd: []byte("k0"), Limit: 13, KeysOnly: keysOnly}
		pages, keys := 0, 0
		for {
			reply, err := s.rangeReply(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if reply.head.Header.MemberId == 0 || reply.head.Header.Revision != st.Rev() {
				t.Fatalf("page %d: header %v; want the member's, at the current revision %d", pages, reply.head.Header, st.Rev())
			}
			more, n, last := reply.head.More, reply.kvs.n, bytes.Clone(reply.kvs.last)
			if req.Revision == 0 {
				req.Revision = reply.head.Header.Revision
			}
			got := pageBytes(t, reply)
			want, err := plain.rangeReply(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if w := pageBytes(t, want); !bytes.Equal(got, w) {
				t.Fatalf("keys only %v, page %d (%s): %d bytes, a read without read-ahead %d", keysOnly, pages, req.Key, len(got), len(w))
			}
			pages++
			keys += n
			// Writes between pages: the next page is at a past revision.
			if _, err := st.Put(ctx, &pb.PutRequest{Key: []byte(fmt.Sprintf("k/%03d", pages*7)), Value: []byte("changed")}); err != nil {
				t.Fatal(err)
			}
			if !more {
				break
			}
			req = &pb.RangeRequest{Key: append(last, 0), RangeEnd: req.RangeEnd, Limit: req.Limit, Revision: req.Revision, KeysOnly: keysOnly}
		}
		if got := s.ahead.served.Load() - served; got != int64(pages-1) || pages < 5 {
			t.Fatalf("keys only %v: %d pages (%d keys), %d answered from pages read ahead; want all but the first", keysOnly, pages, keys, got)
		}
	}
	if !s.ahead.idle() {
		t.Fatal("a page is held after the list's last page")
	}
}

// TestPageReadAheadNotServedPastCompaction: a page read ahead at a revision
// compacted since does not answer; the read reports the compaction.
func TestPageReadAheadNotServedPastCompaction(t *testing.T) {
	readAheadAlways(t)
	_, st, _ := replyStore(t)
	s := New(st, Config{Name: "test", RangeReadAhead: true})
	defer s.Stop()
	ctx := context.Background()
	first, err := s.rangeReply(ctx, &pb.RangeRequest{Key: []byte("k/"), RangeEnd: []byte("k0"), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	rev := first.head.Header.Revision
	next := &pb.RangeRequest{Key: append(bytes.Clone(first.kvs.last), 0), RangeEnd: []byte("k0"), Limit: 10, Revision: rev}
	if s.ahead.idle() {
		t.Fatal("no page read ahead after a page with more")
	}
	if _, err := st.Put(ctx, &pb.PutRequest{Key: []byte("k/000"), Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Compact(ctx, rev+1, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.rangeReply(ctx, next); !errors.Is(err, rpctypes.ErrGRPCCompacted) {
		t.Fatalf("next page after its revision was compacted: %v; want %v", err, rpctypes.ErrGRPCCompacted)
	}
	if served, unused := s.ReadAheadPages(); served != 0 || unused != 1 {
		t.Fatalf("pages read ahead: %d served, %d unused; want 0 and 1 (the page past the compaction)", served, unused)
	}
}

// TestPageReadAheadIsBoundedAndExpires: pages no one asks for are dropped
// after aheadTTL; no more than aheadPages are held; Stop frees them all and
// no page is read after it; a request shaped otherwise (another limit, a
// sort, count only) is not answered from a page read ahead.
func TestPageReadAheadIsBoundedAndExpires(t *testing.T) {
	readAheadAlways(t)
	_, st, _ := replyStore(t)
	s := New(st, Config{Name: "test", RangeReadAhead: true})
	ctx := context.Background()
	defer func(d time.Duration) { aheadTTL = d }(aheadTTL)
	aheadTTL = 3 * time.Second
	for i := 0; i < 10; i++ {
		if _, err := s.rangeReply(ctx, &pb.RangeRequest{Key: []byte(fmt.Sprintf("k/%03d", i)), RangeEnd: []byte("k0"), Limit: 5}); err != nil {
			t.Fatal(err)
		}
	}
	s.ahead.mu.Lock()
	held := len(s.ahead.pages)
	s.ahead.mu.Unlock()
	if held != aheadPages {
		t.Fatalf("%d pages held after 10 lists began; want the bound, %d", held, aheadPages)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !s.ahead.idle() {
		if time.Now().After(deadline) {
			t.Fatal("pages read ahead still held 10 s after their TTL")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if served, unused := s.ReadAheadPages(); served != 0 || unused != aheadPages {
		t.Fatalf("pages read ahead: %d served, %d unused; want 0 and %d (expired)", served, unused, aheadPages)
	}
	first, err := s.rangeReply(ctx, &pb.RangeRequest{Key: []byte("k/"), RangeEnd: []byte("k0"), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	next := &pb.RangeRequest{Key: append(bytes.Clone(first.kvs.last), 0), RangeEnd: []byte("k0"), Limit: 10, Revision: first.head.Header.Revision}
	for _, other := range []*pb.RangeRequest{
		{Key: next.Key, RangeEnd: next.RangeEnd, Limit: 11, Revision: next.Revision},
		{Key: next.Key, RangeEnd: next.RangeEnd, Limit: 10, Revision: next.Revision, SortOrder: pb.RangeRequest_DESCEND},
		{Key: next.Key, RangeEnd: next.RangeEnd, Limit: 10, Revision: next.Revision, CountOnly: true},
	} {
		reply, err := s.rangeReply(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		if s.ahead.served.Load() != 0 {
			t.Fatalf("%v was answered from the page read ahead for %v", other, next)
		}
		var dec pb.RangeResponse
		if err := proto.Unmarshal(pageBytes(t, reply), &dec); err != nil {
			t.Fatal(err)
		}
	}
	s.Stop()
	if !s.ahead.idle() {
		t.Fatal("pages held after Stop")
	}
	if _, err := s.rangeReply(ctx, &pb.RangeRequest{Key: []byte("k/"), RangeEnd: []byte("k0"), Limit: 10}); err != nil {
		t.Fatal(err)
	}
	if !s.ahead.idle() {
		t.Fatal("a page was read ahead after Stop")
	}
}

// TestPageReadAheadWaitsForQuietWrites: no page is read ahead while writes
// arrive (one within aheadQuiet); once they are quiet, the next page is.
func TestPageReadAheadWaitsForQuietWrites(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	st, err := mvcc.Open(t.TempDir(), mvcc.Options{NoSync: true, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		if _, err := st.Put(ctx, &pb.PutRequest{Key: []byte(fmt.Sprintf("k/%03d", i)), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	s := New(st, Config{Name: "test", RangeReadAhead: true})
	defer s.Stop()
	first, err := s.rangeReply(ctx, &pb.RangeRequest{Key: []byte("k/"), RangeEnd: []byte("k0"), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !s.ahead.idle() {
		t.Fatal("a page was read ahead right after a write")
	}
	mu.Lock()
	now = now.Add(aheadQuiet)
	mu.Unlock()
	next := &pb.RangeRequest{Key: append(bytes.Clone(first.kvs.last), 0), RangeEnd: []byte("k0"), Limit: 10, Revision: first.head.Header.Revision}
	if _, err := s.rangeReply(ctx, next); err != nil {
		t.Fatal(err)
	}
	if s.ahead.idle() {
		t.Fatalf("no page read ahead %v after the last write", aheadQuiet)
	}
	if served, _ := s.ReadAheadPages(); served != 0 {
		t.Fatalf("%d pages answered from read-ahead; want 0 (none was read while writes arrived)", served)
	}
}
