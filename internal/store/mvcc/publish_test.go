package mvcc

import (
	"context"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestNoReaderSeesARevisionBeforeItIsPublished holds a group between its
// pebble commit and the publishing of its revision — the window in which
// pebble already shows the batch to new snapshots while its WAL sync may
// not have returned — and reads meanwhile: every read answers the revision
// before the write, without the new value (at once from the published index,
// or after the group from a snapshot), and the first read after the group is
// published answers the write's.
func TestNoReaderSeesARevisionBeforeItIsPublished(t *testing.T) {
	s := openTest(t, "")
	before := put(t, s, "k", "old").Header.Revision

	held, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	releaseGroup := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseGroup) // runs before the store's close: a failed test does not hang on the held group
	s.afterBatchCommit = func() {
		s.afterBatchCommit = nil // the next groups run through
		close(held)
		<-release
	}
	wrote := make(chan *pb.PutResponse, 1)
	go func() {
		resp, err := s.Put(context.Background(), &pb.PutRequest{Key: []byte("k"), Value: []byte("new")})
		if err != nil {
			t.Errorf("put: %v", err)
		}
		wrote <- resp
	}()
	<-held

	// Reads during the window: none may return (they wait) with the new
	// revision; one that returns must answer the old one.
	read := make(chan *pb.RangeResponse, 1)
	go func() {
		resp, err := s.Range(context.Background(), &pb.RangeRequest{Key: []byte("k")})
		if err != nil {
			t.Errorf("range: %v", err)
		}
		read <- resp
	}()
	// A read from a snapshot waits for the group; one from the published
	// index (rangeLatest) answers at once, from the published revision.
	select {
	case resp := <-read:
		if resp.Header.Revision != before || string(resp.Kvs[0].Value) != "old" {
			t.Fatalf("a read during the commit answered revision %d (value %q); the published revision is %d", resp.Header.Revision, resp.Kvs[0].Value, before)
		}
		go func() { read <- nil }()
	case <-time.After(200 * time.Millisecond):
	}
	// A read at the old revision itself goes through a snapshot: it waits
	// for the group (its header then names the new revision) and answers
	// the old value.
	atBefore := make(chan struct{})
	go func() {
		defer close(atBefore)
		resp, err := s.Range(context.Background(), &pb.RangeRequest{Key: []byte("k"), Revision: before})
		if err != nil || string(resp.Kvs[0].Value) != "old" {
			t.Errorf("a read at revision %d during the commit answered %v, %v", before, resp, err)
		}
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-atBefore:
		t.Fatal("a read from a snapshot returned during the commit")
	default:
	}
	releaseGroup()
	<-atBefore
	w := <-wrote
	resp := <-read
	if resp == nil {
		if resp, _ = s.Range(context.Background(), &pb.RangeRequest{Key: []byte("k")}); resp == nil {
			t.Fatal("no read after the commit")
		}
	}
	if resp.Header.Revision != w.Header.Revision || string(resp.Kvs[0].Value) != "new" {
		t.Errorf("the read after the commit answered revision %d, value %q; want %d, \"new\"", resp.Header.Revision, resp.Kvs[0].Value, w.Header.Revision)
	}
}
