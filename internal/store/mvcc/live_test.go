package mvcc

import (
	"bytes"
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

// TestRangeReadsValuesAtEveryHistoryDepth: a range's values come from the
// history entries at the keys' mod revisions, which the reader reaches by
// stepping or by seeking depending on how many older entries of the key
// before lie between — none, fewer than it steps, more — and with deleted
// keys (history but no live entry) in between; every path of a read (the
// latest view, a snapshot at the current revision, a page with a limit, a
// past revision) returns the values written last.
func TestRangeReadsValuesAtEveryHistoryDepth(t *testing.T) {
	s := openTest(t, "")
	ctx := context.Background()
	const n = 60
	want := map[string]string{}
	for i := range n {
		k := fmt.Sprintf("d/%02d", i)
		for j := 0; j <= i%(2*historyNextSteps+3); j++ {
			v := fmt.Sprintf("%s-v%d", k, j)
			put(t, s, k, v)
			want[k] = v
		}
		if i%5 == 4 {
			if _, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte(k)}); err != nil {
				t.Fatal(err)
			}
			delete(want, k)
		}
	}
	past := s.Rev()
	put(t, s, "d/00", "later") // past reads must not see it
	check := func(name string, kvs []*mvccpb.KeyValue, wantAt map[string]string) {
		t.Helper()
		if len(kvs) != len(wantAt) {
			t.Fatalf("%s: %d kvs, want %d", name, len(kvs), len(wantAt))
		}
		for _, kv := range kvs {
			if w, ok := wantAt[string(kv.Key)]; !ok || string(kv.Value) != w {
				t.Fatalf("%s: %s = %q, want %q", name, kv.Key, kv.Value, w)
			}
		}
	}
	wantNow := map[string]string{"d/00": "later"}
	for k, v := range want {
		if k != "d/00" {
			wantNow[k] = v
		}
	}
	r, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("d/"), RangeEnd: []byte("d0")})
	if err != nil {
		t.Fatal(err)
	}
	check("latest", r.Kvs, wantNow)
	r, err = s.Range(ctx, &pb.RangeRequest{Key: []byte("d/"), RangeEnd: []byte("d0"), Revision: s.Rev()})
	if err != nil {
		t.Fatal(err)
	}
	check("snapshot at the current revision", r.Kvs, wantNow)
	var paged []*mvccpb.KeyValue
	for key := []byte("d/"); ; {
		r, err := s.Range(ctx, &pb.RangeRequest{Key: key, RangeEnd: []byte("d0"), Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, r.Kvs...)
		if !r.More {
			break
		}
		key = append(bytes.Clone(r.Kvs[len(r.Kvs)-1].Key), 0)
	}
	check("pages of 7", paged, wantNow)
	r, err = s.Range(ctx, &pb.RangeRequest{Key: []byte("d/"), RangeEnd: []byte("d0"), Revision: past})
	if err != nil {
		t.Fatal(err)
	}
	check("past revision", r.Kvs, want)
}
