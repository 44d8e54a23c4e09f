package mvcc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

func openTest(t *testing.T, dir string) *Store {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := Open(dir, Options{NoSync: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func put(t *testing.T, s *Store, k, v string) *pb.PutResponse {
	t.Helper()
	r, err := s.Put(context.Background(), &pb.PutRequest{Key: []byte(k), Value: []byte(v), PrevKv: true})
	if err != nil {
		t.Fatalf("put %s: %v", k, err)
	}
	return r
}

func get(t *testing.T, s *Store, k string, rev int64) *mvccpb.KeyValue {
	t.Helper()
	r, err := s.Range(context.Background(), &pb.RangeRequest{Key: []byte(k), Revision: rev})
	if err != nil {
		t.Fatalf("get %s@%d: %v", k, rev, err)
	}
	if len(r.Kvs) == 0 {
		return nil
	}
	return r.Kvs[0]
}

func TestEmptyStoreIsAtRevisionOne(t *testing.T) {
	s := openTest(t, "")
	if s.Rev() != 1 {
		t.Fatalf("rev = %d, want 1", s.Rev())
	}
	r, err := s.Range(context.Background(), &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte{0}})
	if err != nil || r.Header.Revision != 1 || len(r.Kvs) != 0 {
		t.Fatalf("range on empty store: %v %v", r, err)
	}
}

func TestPutRevisionsAndHistory(t *testing.T) {
	s := openTest(t, "")
	put(t, s, "a", "1")     // rev 2
	put(t, s, "a", "2")     // rev 3
	r := put(t, s, "b", "") // rev 4
	if r.Header.Revision != 4 {
		t.Fatalf("rev = %d", r.Header.Revision)
	}
	kv := get(t, s, "a", 0)
	if kv.CreateRevision != 2 || kv.ModRevision != 3 || kv.Version != 2 || string(kv.Value) != "2" {
		t.Fatalf("a = %v", kv)
	}
	if kv := get(t, s, "a", 2); string(kv.Value) != "1" || kv.Version != 1 {
		t.Fatalf("a@2 = %v", kv)
	}
	if kv := get(t, s, "b", 3); kv != nil {
		t.Fatalf("b@3 = %v, want none", kv)
	}
	d, err := s.DeleteRange(context.Background(), &pb.DeleteRangeRequest{Key: []byte("a"), PrevKv: true})
	if err != nil || d.Deleted != 1 || d.Header.Revision != 5 || string(d.PrevKvs[0].Value) != "2" {
		t.Fatalf("delete: %v %v", d, err)
	}
	// Deleting nothing does not raise the revision.
	d, err = s.DeleteRange(context.Background(), &pb.DeleteRangeRequest{Key: []byte("zz")})
	if err != nil || d.Deleted != 0 || s.Rev() != 5 {
		t.Fatalf("empty delete: %v %v rev %d", d, err, s.Rev())
	}
	if kv := get(t, s, "a", 4); string(kv.Value) != "2" {
		t.Fatalf("a@4 = %v", kv)
	}
	// Recreated key: new create revision, version 1.
	put(t, s, "a", "3")
	if kv := get(t, s, "a", 0); kv.CreateRevision != 6 || kv.Version != 1 {
		t.Fatalf("recreated a = %v", kv)
	}
	if _, err := s.Range(context.Background(), &pb.RangeRequest{Key: []byte("a"), Revision: 99}); !errors.Is(err, ErrFutureRev) {
		t.Fatalf("future rev: %v", err)
	}
	// Prefix range with limit and count.
	for i := 0; i < 5; i++ {
		put(t, s, fmt.Sprintf("p/%d", i), "x")
	}
	lr, err := s.Range(context.Background(), &pb.RangeRequest{Key: []byte("p/"), RangeEnd: []byte("p0"), Limit: 2})
	if err != nil || len(lr.Kvs) != 2 || !lr.More || lr.Count != 5 {
		t.Fatalf("limited range: %v %v", lr, err)
	}
	// The same page at an older revision, through the history keyspace.
	hr, err := s.Range(context.Background(), &pb.RangeRequest{Key: []byte("p/"), RangeEnd: []byte("p0"), Revision: 9})
	if err != nil || len(hr.Kvs) != 3 || hr.Count != 3 {
		t.Fatalf("historical range: %v %v", hr, err)
	}
}

func TestTxnSharesOneRevision(t *testing.T) {
	s := openTest(t, "")
	put(t, s, "k", "v") // rev 2
	resp, err := s.Txn(context.Background(), &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("k"), Target: pb.Compare_MOD, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_ModRevision{ModRevision: 2}}},
		Success: []*pb.RequestOp{
			{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k"), Value: []byte("w")}}},
			{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("j"), Value: []byte("x")}}},
			{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("j")}}},
		},
	})
	if err != nil || !resp.Succeeded || resp.Header.Revision != 3 {
		t.Fatalf("txn: %v %v", resp, err)
	}
	if got := resp.Responses[2].GetResponseRange().Kvs; len(got) != 1 || string(got[0].Value) != "x" {
		t.Fatalf("range inside txn does not see the txn's put: %v", got)
	}
	// Failing compare runs the else branch; a read-only outcome keeps the revision.
	resp, err = s.Txn(context.Background(), &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("k"), Target: pb.Compare_MOD, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_ModRevision{ModRevision: 2}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k"), Value: []byte("no")}}}},
		Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k")}}}},
	})
	if err != nil || resp.Succeeded || s.Rev() != 3 || string(resp.Responses[0].GetResponseRange().Kvs[0].Value) != "w" {
		t.Fatalf("else branch: %v %v", resp, err)
	}
	// Duplicate keys in one branch are refused.
	_, err = s.Txn(context.Background(), &pb.TxnRequest{Success: []*pb.RequestOp{
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("d"), Value: []byte("1")}}},
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("d"), Value: []byte("2")}}},
	}})
	if !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("duplicate key: %v", err)
	}
	// A put with an unknown lease changes nothing.
	_, err = s.Txn(context.Background(), &pb.TxnRequest{Success: []*pb.RequestOp{
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("e"), Value: []byte("1")}}},
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("f"), Value: []byte("2"), Lease: 42}}},
	}})
	if !errors.Is(err, ErrLeaseNotFound) || get(t, s, "e", 0) != nil || s.Rev() != 3 {
		t.Fatalf("lease not found: %v, rev %d", err, s.Rev())
	}
}

func TestCompaction(t *testing.T) {
	s := openTest(t, "")
	for i := 0; i < 10; i++ {
		put(t, s, "k", fmt.Sprint(i)) // revs 2..11
	}
	put(t, s, "gone", "x")                                                           // 12
	s.DeleteRange(context.Background(), &pb.DeleteRangeRequest{Key: []byte("gone")}) // 13
	if _, err := s.Compact(context.Background(), 8, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Range(context.Background(), &pb.RangeRequest{Key: []byte("k"), Revision: 7}); !errors.Is(err, ErrCompacted) {
		t.Fatalf("range below compaction: %v", err)
	}
	for rev := int64(8); rev <= 11; rev++ {
		if kv := get(t, s, "k", rev); string(kv.Value) != fmt.Sprint(rev-2) {
			t.Fatalf("k@%d = %v", rev, kv)
		}
	}
	if _, err := s.Compact(context.Background(), 8, true); !errors.Is(err, ErrCompacted) {
		t.Fatalf("second compaction at same rev: %v", err)
	}
	if _, err := s.Compact(context.Background(), 13, true); err != nil {
		t.Fatal(err)
	}
	if kv := get(t, s, "gone", 13); kv != nil {
		t.Fatalf("deleted key visible: %v", kv)
	}
	if kv := get(t, s, "k", 13); string(kv.Value) != "9" {
		t.Fatalf("k@13 = %v", kv)
	}
}

func nextResponses(t *testing.T, ws *WatchStream, n int) []*pb.WatchResponse {
	t.Helper()
	var out []*pb.WatchResponse
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for len(out) < n {
		rs, err := ws.Next(ctx)
		if err != nil {
			t.Fatalf("watch: got %d responses of %d: %v", len(out), n, err)
		}
		out = append(out, rs...)
	}
	return out
}

func TestWatchFromHistoryThenLive(t *testing.T) {
	s := openTest(t, "")
	put(t, s, "w/a", "1") // 2
	put(t, s, "w/a", "2") // 3
	ws := s.NewWatchStream()
	defer ws.Close()
	if _, err := ws.Watch(WatchOptions{Key: []byte("w/"), End: []byte("w0"), StartRev: 2, PrevKV: true}); err != nil {
		t.Fatal(err)
	}
	rs := nextResponses(t, ws, 2)
	if !rs[0].Created {
		t.Fatalf("first response is not created: %v", rs[0])
	}
	var evs []*mvccpb.Event
	for _, r := range rs[1:] {
		evs = append(evs, r.Events...)
	}
	put(t, s, "w/b", "3") // 4, live
	for len(evs) < 3 {
		for _, r := range nextResponses(t, ws, 1) {
			evs = append(evs, r.Events...)
		}
	}
	if evs[0].Kv.ModRevision != 2 || evs[1].Kv.ModRevision != 3 || string(evs[1].PrevKv.Value) != "1" || evs[2].Kv.ModRevision != 4 {
		t.Fatalf("events: %v", evs)
	}
	ws.RequestProgress()
	p := nextResponses(t, ws, 1)[0]
	if p.WatchId != ProgressWatchID || p.Header.Revision != 4 || len(p.Events) != 0 {
		t.Fatalf("progress: %v", p)
	}
}

func TestLeaseExpiryDeletesKeys(t *testing.T) {
	s := openTest(t, "")
	id, ttl, err := s.LeaseGrant(context.Background(), 0, 1)
	if err != nil || ttl != 2 {
		t.Fatalf("grant: %v ttl %d", err, ttl)
	}
	ws := s.NewWatchStream()
	defer ws.Close()
	ws.Watch(WatchOptions{Key: []byte("l"), End: []byte{0}})
	if _, err := s.Put(context.Background(), &pb.PutRequest{Key: []byte("l1"), Value: []byte("v"), Lease: id}); err != nil {
		t.Fatal(err)
	}
	var dels int
	deadline := time.Now().Add(6 * time.Second)
	for dels == 0 && time.Now().Before(deadline) {
		for _, r := range nextResponses(t, ws, 1) {
			for _, e := range r.Events {
				if e.Type == mvccpb.DELETE && string(e.Kv.Key) == "l1" {
					dels++
				}
			}
		}
	}
	if dels != 1 || get(t, s, "l1", 0) != nil || s.lessor.exists(id) {
		t.Fatalf("lease expiry did not delete its key (dels %d)", dels)
	}
}

func TestRestartKeepsRevisionAndLeases(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, _, _ := s.LeaseGrant(context.Background(), 0, 100)
	s.Put(context.Background(), &pb.PutRequest{Key: []byte("a"), Value: []byte("1"), Lease: id})
	s.Put(context.Background(), &pb.PutRequest{Key: []byte("b"), Value: []byte("2")})
	s.DeleteRange(context.Background(), &pb.DeleteRangeRequest{Key: []byte("b")})
	s.Close()
	s = openTest(t, dir)
	if s.Rev() != 4 {
		t.Fatalf("rev after restart = %d, want 4", s.Rev())
	}
	l, err := s.LeaseTimeToLive(id, true)
	if err != nil || len(l.Keys) != 1 || l.Remaining < 90*time.Second {
		t.Fatalf("lease after restart: %+v %v", l, err)
	}
	if r := put(t, s, "c", "3"); r.Header.Revision != 5 {
		t.Fatalf("next write rev = %d", r.Header.Revision)
	}
}

func TestRefusesForeignDataDir(t *testing.T) {
	dir := t.TempDir()
	if err := writeFile(dir+"/member/snap/db", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); err == nil {
		t.Fatal("opened an etcd data dir")
	}
}
