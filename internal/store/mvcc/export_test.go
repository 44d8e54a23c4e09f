package mvcc

import (
	"bytes"
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestExportInvariants: Base holds the keys live at the compacted revision,
// Changes every change after it with its sub-revision, and replaying
// Changes over Base gives the live keyspace at Rev; the view does not move
// while writes go on.
func TestExportInvariants(t *testing.T) {
	s := openTest(t, "")
	ctx := context.Background()
	put(t, s, "a", "1")
	put(t, s, "b", "1")
	put(t, s, "a", "2")
	if _, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	compacted := s.Rev()
	if _, err := s.Compact(ctx, compacted, true); err != nil {
		t.Fatal(err)
	}
	txn := &pb.TxnRequest{Success: []*pb.RequestOp{
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("c"), Value: []byte("1")}}},
		{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("a")}}},
	}}
	if _, err := s.Txn(ctx, txn); err != nil {
		t.Fatal(err)
	}
	put(t, s, "b", "2")
	e, err := s.Export()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	put(t, s, "after-the-view", "x") // must not show
	if e.Rev != compacted+2 || e.Compacted != compacted {
		t.Fatalf("view at %d compacted %d, want %d compacted %d", e.Rev, e.Compacted, compacted+2, compacted)
	}
	state := map[string]string{}
	err = e.Base(ctx, func(kv *mvccpb.KeyValue) error { state[string(kv.Key)] = string(kv.Value); return nil })
	if err != nil || len(state) != 1 || state["a"] != "2" {
		t.Fatalf("base %v (%v), want a=2", state, err)
	}
	var subs []int64
	last, err := e.Changes(ctx, func(c Change) error {
		subs = append(subs, c.Sub)
		if c.Type == mvccpb.DELETE {
			delete(state, string(c.KV.Key))
		} else {
			state[string(c.KV.Key)] = string(c.KV.Value)
		}
		return nil
	})
	if err != nil || last != e.Rev || len(subs) != 3 || subs[0] != 0 || subs[1] != 1 || subs[2] != 0 {
		t.Fatalf("changes: last %d subs %v (%v)", last, subs, err)
	}
	if len(state) != 2 || state["b"] != "2" || state["c"] != "1" {
		t.Fatalf("base + changes = %v, want b=2 c=1", state)
	}
}

// TestHistoryImporter: changes keep their revisions and sub-revisions, come
// in order only, and FinishAt sets both revisions and drops the history the
// compaction made unreachable.
func TestHistoryImporter(t *testing.T) {
	s := openTest(t, "")
	h, err := s.NewHistoryImporter()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Lease(9, 60, time.Minute); err != nil {
		t.Fatal(err)
	}
	kv := func(k, v string, create, mod, ver, lease int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte(k), Value: []byte(v), CreateRevision: create, ModRevision: mod, Version: ver, Lease: lease}
	}
	steps := []struct {
		typ mvccpb.Event_EventType
		kv  *mvccpb.KeyValue
		sub int64
	}{
		{mvccpb.PUT, kv("a", "1", 2, 2, 1, 0), 0},
		{mvccpb.PUT, kv("b", "1", 2, 2, 1, 9), 1},
		{mvccpb.PUT, kv("a", "2", 2, 3, 2, 0), 0}, // below the compaction: unreachable once compacted at 4
		{mvccpb.PUT, kv("a", "3", 2, 4, 3, 0), 0},
		{mvccpb.DELETE, &mvccpb.KeyValue{Key: []byte("b"), ModRevision: 5}, 0},
		{mvccpb.PUT, kv("c", "1", 5, 5, 1, 9), 1},
	}
	for _, st := range steps {
		if err := h.Change(st.typ, st.kv, st.sub); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Change(mvccpb.PUT, kv("z", "1", 5, 5, 1, 0), 1); err == nil {
		t.Fatal("a change at an old (revision, sub-revision) was accepted")
	}
	if err := h.FinishAt(6, 4); err != nil {
		t.Fatal(err)
	}
	if s.Rev() != 6 || s.CompactedRev() != 4 {
		t.Fatalf("at %d compacted %d, want 6 and 4", s.Rev(), s.CompactedRev())
	}
	if got := get(t, s, "a", 4); string(got.Value) != "3" || got.Version != 3 || got.CreateRevision != 2 {
		t.Fatalf("a at 4: %v", got)
	}
	if got := get(t, s, "b", 4); got == nil || got.Lease != 9 {
		t.Fatalf("b at 4: %v", got)
	}
	if got := get(t, s, "b", 6); got != nil {
		t.Fatalf("b at 6: %v, want deleted", got)
	}
	if l, err := s.LeaseTimeToLive(9, true); err != nil || len(l.Keys) != 1 || !bytes.Equal(l.Keys[0], []byte("c")) {
		t.Fatalf("lease 9: %+v %v, want key c", l, err)
	}
	e, err := s.Export()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var n int
	if _, err := e.Changes(context.Background(), func(c Change) error { n++; return nil }); err != nil || n != 2 {
		t.Fatalf("changes after the compaction: %d (%v), want 2", n, err)
	}
}

// TestCloseWaitsForExport: Close waits for an open view, which stops with
// ErrClosed once Close has begun; no view opens after it.
func TestCloseWaitsForExport(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, "a", "1")
	e, err := s.Export()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- s.Close() }()
	<-s.stopc // Close has begun
	select {
	case err := <-done:
		t.Fatalf("Close returned (%v) while a view was open", err)
	default:
	}
	if _, err := e.Changes(context.Background(), func(Change) error { return nil }); err != ErrClosed {
		t.Fatalf("changes while closing: %v, want ErrClosed", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := s.Export(); err != ErrClosed {
		t.Fatalf("export after close: %v, want ErrClosed", err)
	}
}
