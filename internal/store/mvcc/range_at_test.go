package mvcc

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"
)

// TestRangeAtOldRevisionMatchesScan: ranges at revisions below the current
// one (a paged list's later pages; with a limit, count-only, keys-only, or
// whole) answer exactly what the history scan answers, whatever happened since: creates,
// updates, deletes, recreates, a delete of many keys at once, writes outside
// the range; and with more changes since than countAt reads (the scan then
// answers).
func TestRangeAtOldRevisionMatchesScan(t *testing.T) {
	s := openTest(t, "")
	ctx := context.Background()
	rng := rand.New(rand.NewSource(3))
	key := func(i int) string { return fmt.Sprintf("r/%04d", i) }
	var revs []int64
	for i := 0; i < 400; i += 2 {
		revs = append(revs, put(t, s, key(i), "v0").Header.Revision)
	}
	for step := 0; step < 1500; step++ {
		i := rng.Intn(420)
		switch rng.Intn(6) {
		case 0, 1:
			put(t, s, key(i), fmt.Sprint(step))
		case 2:
			if _, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte(key(i))}); err != nil {
				t.Fatal(err)
			}
		case 3:
			put(t, s, fmt.Sprintf("q/%04d", i), "outside")
		case 4:
			if step%300 == 0 { // many keys in one revision
				if _, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte(key(i)), RangeEnd: []byte(key(i + 60))}); err != nil {
					t.Fatal(err)
				}
			}
		case 5:
			revs = append(revs, s.Rev())
		}
	}
	cur := s.Rev()
	revs = append(revs, cur-1, cur-5, cur-200)
	for i := 0; i < 400; i++ {
		rev := revs[rng.Intn(len(revs))]
		req := &pb.RangeRequest{Key: []byte(key(rng.Intn(420))), Revision: rev, Limit: int64(rng.Intn(30)),
			CountOnly: rng.Intn(4) == 0, KeysOnly: rng.Intn(2) == 0}
		if rng.Intn(3) == 0 {
			req.RangeEnd = []byte{0}
		} else {
			req.RangeEnd = []byte(key(rng.Intn(440)))
		}
		got, err := s.Range(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		snap, at, err := s.readView()
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.rangeReader(snap, nil, at, req)
		snap.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("range %v at revision %d (current %d): the changes since give count %d, %d kvs; the scan gives count %d, %d kvs",
				req, rev, at, got.Count, len(got.Kvs), want.Count, len(want.Kvs))
		}
	}
	// rangeAt itself: it answers for a recent revision, and leaves an old
	// one with more changes since than keys to the scan.
	snap, at, err := s.readView()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	iv := s.idx.viewAt(at)
	if _, ok, err := s.rangeAt(snap, scanSpec{key: []byte("r/"), end: []byte{0}, rev: at - 3, cur: at, index: iv}, &kvList{}); err != nil || !ok {
		t.Fatalf("rangeAt 3 revisions back: ok %v, err %v; want an answer", ok, err)
	}
	if _, ok, err := s.rangeAt(snap, scanSpec{key: []byte("r/"), end: []byte("r/0010"), rev: revs[0], cur: at, index: iv}, &kvList{}); err != nil || ok {
		t.Fatalf("rangeAt %d revisions back over a 10-key range: ok %v, err %v; want the scan to answer", at-revs[0], ok, err)
	}
}
