package mvcc

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// viewKeys lists the keys of v, or "<none>".
func viewKeys(v *indexView) string {
	if v == nil {
		return "<none>"
	}
	var keys []string
	v.ascend([]byte{0}, []byte{0}, func(m *keyMeta) bool { keys = append(keys, m.key); return true })
	return strings.Join(keys, ",")
}

// TestIndexViewOnlyForReaders walks the index through the publications a
// writer and readers make: no view (no copied nodes) while nobody reads, the
// first reader's own view while the working tree is still at the published
// revision, views at every publish while readers are about, none once they
// have been gone for readersRecentFor, and none for a reader while the writer
// has changed the tree since the last publish.
func TestIndexViewOnlyForReaders(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	x := newLiveIndex()
	x.set(&keyMeta{key: "a", mod: 2})
	x.publish(2, t0)
	if v := x.view.Load(); v != nil {
		t.Fatalf("publish with no reader ever made a view: %s", viewKeys(v))
	}
	v2 := x.viewAt(2)
	if v2 == nil || v2.rev != 2 || viewKeys(v2) != "a" {
		t.Fatalf("first reader at 2: view %s, want a at 2", viewKeys(v2))
	}
	x.set(&keyMeta{key: "b", mod: 3}) // the writer evaluates the next group
	if v := x.viewAt(2); v != v2 || viewKeys(v) != "a" {
		t.Fatalf("reader at 2 while the writer works: %s, want the view of a", viewKeys(v))
	}
	x.publish(3, t0.Add(time.Millisecond)) // a reader used a view since the last publish
	if v := x.view.Load(); v == nil || v.rev != 3 || viewKeys(v) != "a,b" {
		t.Fatalf("publish after a reader: %s, want a,b at 3", viewKeys(v))
	}
	x.set(&keyMeta{key: "c", mod: 4})
	x.publish(4, t0.Add(500*time.Millisecond)) // nobody read at 3, but a reader did half a second ago
	if v := x.view.Load(); v == nil || v.rev != 4 || viewKeys(v) != "a,b,c" {
		t.Fatalf("publish 0.5 s after a reader: %s, want a,b,c at 4", viewKeys(v))
	}
	x.set(&keyMeta{key: "d", mod: 5})
	x.publish(5, t0.Add(time.Millisecond+readersRecentFor)) // the last reader is gone
	if v := x.view.Load(); v != nil {
		t.Fatalf("publish %v after the last reader: view %s", readersRecentFor, viewKeys(v))
	}
	x.set(&keyMeta{key: "e", mod: 6}) // working tree ahead of 5
	if v := x.viewAt(5); v != nil {
		t.Fatalf("reader at 5 after the writer changed the tree: view %s, want none (read pebble)", viewKeys(v))
	}
	if v := x.latest(); v != nil {
		t.Fatalf("latest after the writer changed the tree: view %s, want none", viewKeys(v))
	}
	x.publish(6, t0.Add(3*time.Second)) // the readers above asked for one
	if v := x.latest(); v == nil || v.rev != 6 || viewKeys(v) != "a,b,c,d,e" {
		t.Fatalf("latest at 6: %s, want a,b,c,d,e", viewKeys(v))
	}
	if v := x.viewAt(5); v != nil {
		t.Fatalf("reader at 5 after 6 was published: view %s", viewKeys(v))
	}
	if v2.rev != 2 || viewKeys(v2) != "a" {
		t.Fatalf("the view at 2 changed: %s", viewKeys(v2))
	}
}

// TestWritesAloneMakeNoIndexView checks the store end to end: puts with no
// read between them leave no view, and a read then serves the current
// revision from a view of its own.
func TestWritesAloneMakeNoIndexView(t *testing.T) {
	s := openTest(t, "")
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		put(t, s, k, "v-"+k)
	}
	if v := s.idx.view.Load(); v != nil {
		t.Fatalf("puts alone left a view at %d", v.rev)
	}
	resp, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte{0}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 3 || string(resp.Kvs[2].Value) != "v-c" || resp.Header.Revision != s.Rev() {
		t.Fatalf("range after puts: %d kvs at %d, want 3 at %d", len(resp.Kvs), resp.Header.Revision, s.Rev())
	}
	if v := s.idx.view.Load(); v == nil || v.rev != s.Rev() {
		t.Fatalf("the read made no view at %d", s.Rev())
	}
	checkIndex(t, s)
}
