package mvcc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

// TestImportKeepsRevisions is the contract of a move: keys keep their
// revisions, the store continues at R, watches from R+1 see later writes,
// and catch-up events keep their own revisions.
func TestImportKeepsRevisions(t *testing.T) {
	s := openTest(t, "")
	im, err := s.NewImporter()
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Lease(77, 60, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	in := []*mvccpb.KeyValue{
		{Key: []byte("/registry/a"), Value: []byte("A"), CreateRevision: 5, ModRevision: 40, Version: 7},
		{Key: []byte("/registry/b"), Value: []byte("B"), CreateRevision: 90, ModRevision: 90, Version: 1, Lease: 77},
	}
	for _, kv := range in {
		if err := im.Put(kv); err != nil {
			t.Fatal(err)
		}
	}
	const R = 100 // the newest event at R was a delete of some other key
	if err := im.Finish(R); err != nil {
		t.Fatal(err)
	}
	if s.Rev() != R || s.CompactedRev() != R {
		t.Fatalf("rev %d compacted %d", s.Rev(), s.CompactedRev())
	}
	for _, want := range in {
		got := get(t, s, string(want.Key), R)
		if got.CreateRevision != want.CreateRevision || got.ModRevision != want.ModRevision || got.Version != want.Version || got.Lease != want.Lease || string(got.Value) != string(want.Value) {
			t.Fatalf("imported %s = %v, want %v", want.Key, got, want)
		}
	}
	if _, err := s.Range(context.Background(), &pb.RangeRequest{Key: []byte("/registry/a"), Revision: R - 1}); !errors.Is(err, ErrCompacted) {
		t.Fatalf("range below the import: %v", err)
	}
	if l, err := s.LeaseTimeToLive(77, true); err != nil || len(l.Keys) != 1 {
		t.Fatalf("imported lease: %+v %v", l, err)
	}

	ws := s.NewWatchStream()
	defer ws.Close()
	if _, err := ws.Watch(WatchOptions{Key: []byte("/registry/"), End: []byte("/registry0"), StartRev: R + 1, PrevKV: true}); err != nil {
		t.Fatal(err)
	}
	nextResponses(t, ws, 1) // created

	// Catch-up events with their own revisions: a txn of two changes at 101, a delete at 103.
	err = s.ApplyEvents(context.Background(), []ImportEvent{
		{Type: mvccpb.PUT, KV: &mvccpb.KeyValue{Key: []byte("/registry/a"), Value: []byte("A2"), CreateRevision: 5, ModRevision: 101, Version: 8}},
		{Type: mvccpb.PUT, KV: &mvccpb.KeyValue{Key: []byte("/registry/c"), Value: []byte("C"), CreateRevision: 101, ModRevision: 101, Version: 1}},
		{Type: mvccpb.DELETE, KV: &mvccpb.KeyValue{Key: []byte("/registry/b"), ModRevision: 103}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Rev() != 103 {
		t.Fatalf("rev after catch-up = %d", s.Rev())
	}
	var evs []*mvccpb.Event
	for len(evs) < 3 {
		for _, r := range nextResponses(t, ws, 1) {
			evs = append(evs, r.Events...)
		}
	}
	if evs[0].Kv.ModRevision != 101 || string(evs[0].PrevKv.Value) != "A" || evs[1].Kv.ModRevision != 101 || evs[2].Type != mvccpb.DELETE || evs[2].Kv.ModRevision != 103 {
		t.Fatalf("catch-up events: %v", evs)
	}
	if err := s.SetRevision(context.Background(), 110); err != nil {
		t.Fatal(err)
	}
	// The next ordinary write continues right after.
	if r := put(t, s, "/registry/d", "D"); r.Header.Revision != 111 {
		t.Fatalf("first write after import got %d, want 111", r.Header.Revision)
	}
	if kv := get(t, s, "/registry/a", 0); kv.Version != 8 || kv.CreateRevision != 5 {
		t.Fatalf("a after catch-up = %v", kv)
	}
	// Refused: events not above the store's revision.
	err = s.ApplyEvents(context.Background(), []ImportEvent{{Type: mvccpb.PUT, KV: &mvccpb.KeyValue{Key: []byte("x"), ModRevision: 50, CreateRevision: 50, Version: 1}}})
	if err == nil {
		t.Fatal("applied an event below the store's revision")
	}
	if _, err := s.NewImporter(); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("second import: %v", err)
	}
}
