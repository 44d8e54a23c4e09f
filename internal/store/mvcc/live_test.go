package mvcc

import (
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestLiveEntriesHoldNoValue checks format 2's layout: a put writes its
// value once (the history entry), the live entry holds the metadata, and
// reads still return the value — single keys, ranges, RangeStream, ranges in
// a transaction, exports and hashes.
func TestLiveEntriesHoldNoValue(t *testing.T) {
	s := openTest(t, "")
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		put(t, s, fmt.Sprintf("v/%02d", i), fmt.Sprintf("value-%d", i))
	}
	put(t, s, "v/07", "again")
	rec, err := s.get(s.db, liveKey([]byte("v/07")))
	if err != nil || rec == nil {
		t.Fatalf("live entry of v/07: %q, %v", rec, err)
	}
	if v, err := recordValue(rec); err != nil || len(v) != 0 {
		t.Fatalf("live entry of v/07 holds a value: %q, %v", v, err)
	}
	if kv := get(t, s, "v/07", 0); string(kv.Value) != "again" || kv.Version != 2 {
		t.Fatalf("v/07 = %v", kv)
	}
	r, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("v/"), RangeEnd: []byte("v0")})
	if err != nil || len(r.Kvs) != 50 {
		t.Fatalf("range: %d kvs, %v", len(r.Kvs), err)
	}
	for i, kv := range r.Kvs {
		want := fmt.Sprintf("value-%d", i)
		if i == 7 {
			want = "again"
		}
		if string(kv.Value) != want {
			t.Fatalf("range: %s = %q, want %q", kv.Key, kv.Value, want)
		}
	}
	var streamed int
	last, err := s.RangeStream(ctx, &pb.RangeRequest{Key: []byte("v/"), RangeEnd: []byte("v0")}, 7, func(kvs []*mvccpb.KeyValue) error {
		for _, kv := range kvs {
			if len(kv.Value) == 0 {
				return fmt.Errorf("%s streamed without its value", kv.Key)
			}
		}
		streamed += len(kvs)
		return nil
	})
	if err != nil || streamed+len(last.GetKvs()) != 50 {
		t.Fatalf("RangeStream: %d kvs, %v", streamed, err)
	}
	tr, err := s.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("v/07")}}}}})
	if err != nil || string(tr.Responses[0].GetResponseRange().Kvs[0].Value) != "again" {
		t.Fatalf("read txn: %v, %v", tr, err)
	}
	// A value compare in a write transaction reads the value.
	tr, err = s.Txn(ctx, &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("v/07"), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: []byte("again")}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("v/07"), Value: []byte("third"), PrevKv: true}}}},
	})
	if err != nil || !tr.Succeeded || string(tr.Responses[0].GetResponsePut().PrevKv.Value) != "again" {
		t.Fatalf("value compare: %v, %v", tr, err)
	}
	// ignore_value keeps the value, read from the history.
	if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("v/07"), IgnoreValue: true}); err != nil {
		t.Fatal(err)
	}
	if kv := get(t, s, "v/07", 0); string(kv.Value) != "third" {
		t.Fatalf("after ignore_value: %v", kv)
	}
	d, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("v/08"), PrevKv: true})
	if err != nil || len(d.PrevKvs) != 1 || string(d.PrevKvs[0].Value) != "value-8" {
		t.Fatalf("delete prev_kv: %v, %v", d, err)
	}
}

// TestFormat1DirIsReadAndRaised opens a data dir of store format 1 (live
// entries carry their value) whose live values were made to differ from the
// history's, so a read of the live value would show: every read takes the
// history's, and the format is raised to 2 before anything is written.
func TestFormat1DirIsReadAndRaised(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	for i := 0; i < 20; i++ {
		put(t, s, fmt.Sprintf("f/%02d", i), fmt.Sprintf("value-%d", i))
	}
	snap, rev, err := s.readView()
	if err != nil {
		t.Fatal(err)
	}
	b := s.db.NewBatch()
	err = scanLive(snap, nil, []byte("f/"), []byte("f0"), false, func(e *entry) error {
		kv := e.keyValue(true)
		kv.Value = []byte("stale live copy")
		_ = b.Set(liveKey(kv.Key), encodeRecord(recordPut, kv), nil)
		return nil
	})
	snap.Close()
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Set(metaFormat, append([]byte(formatMagic), 1), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = openTest(t, dir)
	if s.Rev() != rev {
		t.Fatalf("revision after reopen = %d, want %d", s.Rev(), rev)
	}
	if magic, _ := s.get(s.db, metaFormat); int(magic[len(magic)-1]) != FormatVersion {
		t.Fatalf("format after open = %d, want %d", magic[len(magic)-1], FormatVersion)
	}
	r, err := s.Range(context.Background(), &pb.RangeRequest{Key: []byte("f/"), RangeEnd: []byte("f0")})
	if err != nil || len(r.Kvs) != 20 {
		t.Fatalf("range: %v, %v", r, err)
	}
	for i, kv := range r.Kvs {
		if string(kv.Value) != fmt.Sprintf("value-%d", i) {
			t.Fatalf("%s = %q: read from the format-1 live entry", kv.Key, kv.Value)
		}
	}
	if p := put(t, s, "f/03", "new"); string(p.PrevKv.Value) != "value-3" {
		t.Fatalf("prev_kv = %q", p.PrevKv.Value)
	}
}
