package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

const testLease = 0x1234

// history is what a store did, as the tests replay it.
type history struct {
	s             *mvcc.Store
	compacted     int64
	revsToCompare []int64
}

// buildStore makes a store with every kind of history: versions, deletes
// and re-creates, multi-op txns, leases, a key with a NUL byte, a large
// value, more keys than one bbolt batch, a compaction, and changes after it.
func buildStore(t *testing.T) *history {
	t.Helper()
	ctx := context.Background()
	s, err := mvcc.Open(t.TempDir(), mvcc.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, _, err := s.LeaseGrant(ctx, testLease, 300); err != nil {
		t.Fatal(err)
	}
	put := func(k, v string, lease int64) {
		t.Helper()
		if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte(k), Value: []byte(v), Lease: lease}); err != nil {
			t.Fatalf("put %q: %v", k, err)
		}
	}
	del := func(k string) {
		t.Helper()
		if _, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte(k)}); err != nil {
			t.Fatalf("delete %q: %v", k, err)
		}
	}
	txn := func(ops ...*pb.RequestOp) {
		t.Helper()
		if _, err := s.Txn(ctx, &pb.TxnRequest{Success: ops}); err != nil {
			t.Fatalf("txn: %v", err)
		}
	}
	opPut := func(k, v string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k), Value: []byte(v)}}}
	}
	opDel := func(k string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte(k)}}}
	}
	put("/a", "a1", 0)
	put("/b", "b1", 0)
	put("/c", "c1", testLease)
	put("/a", "a2", 0)
	txn(opPut("/d", "d1"), opPut("/e", "e1"), opDel("/b"))
	put("/a", "a3", 0)
	del("/c")
	put("/k\x00nul", "nul", 0)
	put("/big", string(bytes.Repeat([]byte("x"), 100<<10)), 0)
	for i := range 12_000 {
		put(fmt.Sprintf("/many/%05d", i), fmt.Sprint(i), 0)
	}
	txn(opPut("/x", "x1"), opPut("/y", "y1"))
	h := &history{s: s}
	h.compacted = s.Rev()
	del("/x") // a delete after the compaction point of a key live at it
	if _, err := s.Compact(ctx, h.compacted, true); err != nil {
		t.Fatal(err)
	}
	put("/a", "a4", 0)
	txn(opPut("/f", "f1"), opPut("/g", "g1"), opDel("/d"))
	h.revsToCompare = append(h.revsToCompare, h.compacted, s.Rev())
	put("/b", "b2", testLease) // re-created, on the lease
	for i := range 11_000 {
		put(fmt.Sprintf("/more/%05d", i), fmt.Sprint(i), 0)
	}
	del("/many/00007")
	h.revsToCompare = append(h.revsToCompare, s.Rev())
	return h
}

// saveFile writes f as `etcdctl snapshot save` does: the bytes, then their
// SHA-256.
func saveFile(t *testing.T, f *File, path string) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := f.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	buf.Write(sum[:])
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// leftovers lists the temporary snapshot directories beside s's data dir.
func leftovers(t *testing.T, s *mvcc.Store) []string {
	t.Helper()
	dir, prefix := tempPlace(s.Dir())
	found, err := filepath.Glob(filepath.Join(dir, prefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func take(t *testing.T, s *mvcc.Store) (string, *File) {
	t.Helper()
	f, err := Take(context.Background(), s, 42, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "snap.db")
	saveFile(t, f, path)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(t, s); len(left) != 0 {
		t.Fatalf("Take left %q after Close", left)
	}
	return path, f
}

func rangeAll(t *testing.T, s *mvcc.Store, rev int64) []*mvccpb.KeyValue {
	t.Helper()
	r, err := s.Range(context.Background(), &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: rev})
	if err != nil {
		t.Fatalf("range at %d: %v", rev, err)
	}
	return r.Kvs
}

func sameKVs(t *testing.T, what string, got, want []*mvccpb.KeyValue) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d keys, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || g.CreateRevision != w.CreateRevision ||
			g.ModRevision != w.ModRevision || g.Version != w.Version || g.Lease != w.Lease {
			t.Fatalf("%s: key %d is %q c=%d m=%d v=%d l=%x, want %q c=%d m=%d v=%d l=%x", what, i,
				g.Key, g.CreateRevision, g.ModRevision, g.Version, g.Lease, w.Key, w.CreateRevision, w.ModRevision, w.Version, w.Lease)
		}
	}
}

func exportChanges(t *testing.T, s *mvcc.Store) []mvcc.Change {
	t.Helper()
	e, err := s.Export()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var out []mvcc.Change
	if _, err := e.Changes(context.Background(), func(c mvcc.Change) error { out = append(out, c); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRoundTripStoreFileStore: a store's snapshot restored into a new store
// holds the same revisions, keys at every revision from the compacted one,
// the same changes (sub-revisions included) and the same leases.
func TestRoundTripStoreFileStore(t *testing.T) {
	h := buildStore(t)
	path, f := take(t, h.s)
	if f.Rev != h.s.Rev() || f.Compacted != h.compacted || f.Leases != 1 {
		t.Fatalf("snapshot stats %+v; store at %d compacted %d", f.Stats, h.s.Rev(), h.compacted)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	st, err := Restore(context.Background(), path, dir, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restore: %+v", st)
	r, err := mvcc.Open(dir, mvcc.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Rev() != h.s.Rev() || r.CompactedRev() != h.compacted {
		t.Fatalf("restored at %d compacted %d, want %d compacted %d", r.Rev(), r.CompactedRev(), h.s.Rev(), h.compacted)
	}
	for _, rev := range h.revsToCompare {
		sameKVs(t, fmt.Sprintf("range at %d", rev), rangeAll(t, r, rev), rangeAll(t, h.s, rev))
	}
	if _, err := r.Range(context.Background(), &pb.RangeRequest{Key: []byte("/a"), Revision: h.compacted - 1}); err != mvcc.ErrCompacted {
		t.Fatalf("range below the compacted revision: %v", err)
	}
	got, want := exportChanges(t, r), exportChanges(t, h.s)
	if len(got) != len(want) {
		t.Fatalf("restored %d changes, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Type != w.Type || g.Sub != w.Sub {
			t.Fatalf("change %d: %v sub %d, want %v sub %d", i, g.Type, g.Sub, w.Type, w.Sub)
		}
		sameKVs(t, fmt.Sprintf("change %d", i), []*mvccpb.KeyValue{g.KV}, []*mvccpb.KeyValue{w.KV})
	}
	l, err := r.LeaseTimeToLive(testLease, true)
	if err != nil || l.GrantedTTL != 300 || len(l.Keys) != 1 || string(l.Keys[0]) != "/b" {
		t.Fatalf("restored lease: %+v %v", l, err)
	}
}

// TestRevisionMarker: when the newest revisions changed no key, the file
// still carries the store's revision.
func TestRevisionMarker(t *testing.T) {
	s, err := mvcc.Open(t.TempDir(), mvcc.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRevision(ctx, 50); err != nil {
		t.Fatal(err)
	}
	path, _ := take(t, s)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var n int
	rev, err := r.Changes(ctx, func(mvccpb.Event_EventType, *mvccpb.KeyValue, int64) error { n++; return nil })
	if err != nil || rev != 50 || n != 1 {
		t.Fatalf("file revision %d with %d changes (%v), want 50 with 1", rev, n, err)
	}
}
