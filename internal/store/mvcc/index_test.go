package mvcc

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// checkIndex fails unless the published index is at the store's revision and
// equals pebble's live entries, key by key and field by field.
func checkIndex(t *testing.T, s *Store) {
	t.Helper()
	snap, rev, err := s.readView()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	v := s.idx.viewAt(rev)
	if v == nil {
		t.Fatalf("no index view at revision %d (published: %d, changed since: %v)", rev, s.idx.rev, s.idx.dirty)
	}
	var want []*keyMeta
	err = scanLive(snap, nil, []byte{0}, []byte{0}, false, func(e *entry) error {
		want = append(want, metaOf(e.keyValue(true)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []*keyMeta
	v.ascend([]byte{0}, []byte{0}, func(m *keyMeta) bool { got = append(got, m); return true })
	if len(got) != len(want) {
		t.Fatalf("index at %d has %d keys, pebble %d", rev, len(got), len(want))
	}
	for i := range want {
		if *got[i] != *want[i] {
			t.Fatalf("index at %d: %+v, pebble: %+v", rev, *got[i], *want[i])
		}
	}
}

// TestIndexFollowsEveryWritePath drives random puts, deletes, transactions,
// lease revokes and compactions from concurrent clients (so groups hold many
// requests) and checks the index against pebble after each round, after a
// reopen, after a state snapshot restore and after an import.
func TestIndexFollowsEveryWritePath(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	ctx := context.Background()
	rng := rand.New(rand.NewSource(1))
	lease, _, err := s.LeaseGrant(ctx, 0, 3600)
	if err != nil {
		t.Fatal(err)
	}
	key := func(r *rand.Rand) []byte { return []byte(fmt.Sprintf("k/%02d", r.Intn(40))) }
	for round := 0; round < 30; round++ {
		var wg sync.WaitGroup
		for c := 0; c < 8; c++ {
			wg.Add(1)
			go func(seed int64) {
				defer wg.Done()
				r := rand.New(rand.NewSource(seed))
				for i := 0; i < 20; i++ {
					randomWrite(ctx, r, s, key(r), key(r), lease)
				}
			}(rng.Int63())
		}
		wg.Wait()
		checkIndex(t, s)
		if round%10 == 9 {
			if _, err := s.LeaseRevoke(ctx, lease); err != nil {
				t.Fatal(err)
			}
			checkIndex(t, s)
			if lease, _, err = s.LeaseGrant(ctx, 0, 3600); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Compact(ctx, s.Rev()-5, true); err != nil {
				t.Fatal(err)
			}
			checkIndex(t, s)
		}
	}
	var state bytes.Buffer
	if _, _, err := s.WriteState(&state); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, dir)
	checkIndex(t, s)

	r := openTest(t, "")
	put(t, r, "stale", "gone after restore")
	if _, err := r.RestoreState(&state); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, r)
	if r.idx.viewAt(r.Rev()).count([]byte{0}, []byte{0}) != s.idx.viewAt(s.Rev()).count([]byte{0}, []byte{0}) {
		t.Fatal("restored index differs from the source's")
	}

	im := openTest(t, "")
	imp, err := im.NewImporter()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		kv := &mvccpb.KeyValue{Key: []byte(fmt.Sprintf("i/%d", i)), Value: []byte("v"), CreateRevision: 3, ModRevision: int64(4 + i), Version: 2}
		if err := imp.Put(kv); err != nil {
			t.Fatal(err)
		}
	}
	if err := imp.Finish(20); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, im)
	ev := []ImportEvent{{Type: mvccpb.PUT, KV: &mvccpb.KeyValue{Key: []byte("i/1"), Value: []byte("w"), CreateRevision: 3, ModRevision: 21, Version: 3}},
		{Type: mvccpb.DELETE, KV: &mvccpb.KeyValue{Key: []byte("i/2"), ModRevision: 22}}}
	if err := im.ApplyEvents(ctx, ev); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, im)
}

// randomWrite sends one random write; refusals (a put with ignore_value on
// an absent key, a compare that fails) are part of what is tested.
func randomWrite(ctx context.Context, r *rand.Rand, s *Store, k, k2 []byte, lease int64) {
	switch r.Intn(6) {
	case 0, 1:
		_, _ = s.Put(ctx, &pb.PutRequest{Key: k, Value: []byte(fmt.Sprint(r.Int())), PrevKv: r.Intn(2) == 0})
	case 2:
		_, _ = s.Put(ctx, &pb.PutRequest{Key: k, Lease: lease, IgnoreValue: r.Intn(3) == 0})
	case 3:
		end := k2
		if bytes.Compare(end, k) < 0 {
			end = nil
		}
		_, _ = s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: k, RangeEnd: end})
	case 4: // kube-apiserver's create: put if absent
		_, _ = s.Txn(ctx, &pb.TxnRequest{
			Compare: []*pb.Compare{{Key: k, Target: pb.Compare_MOD, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_ModRevision{ModRevision: 0}}},
			Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: k, Value: []byte("c")}}}}})
	case 5: // an update guarded by a value compare, with a range in the branch
		_, _ = s.Txn(ctx, &pb.TxnRequest{
			Compare: []*pb.Compare{{Key: k, Target: pb.Compare_VALUE, Result: pb.Compare_NOT_EQUAL, TargetUnion: &pb.Compare_Value{Value: []byte("x")}}},
			Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: k, Value: []byte("x")}}},
				{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: k2}}}},
			Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: k, RangeEnd: []byte{0}, Limit: 3}}}}})
	}
}

// TestIndexMemoryPerKey reports the heap the index takes per key, for keys
// shaped like kube-apiserver's (about 45 bytes). It asserts nothing.
func TestIndexMemoryPerKey(t *testing.T) {
	const n = 100000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := newLiveIndex()
	for i := 0; i < n; i++ {
		x.set(&keyMeta{key: fmt.Sprintf("/registry/configmaps/default/cm-%08d", i), create: int64(i), mod: int64(i), version: 1})
	}
	x.publish(n, time.Time{})
	runtime.GC()
	runtime.ReadMemStats(&after)
	perKey := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("index: %d keys of 45 bytes, %.0f bytes of heap per key (%.1f MiB)", n, perKey, perKey*n/(1<<20))
	runtime.KeepAlive(x)
}

// TestCountMemoMatchesWalk asks a view for the counts a paged list asks —
// the rest of one range from ever later keys — interleaved with other
// ranges' counts and with earlier keys, and compares each with a walk.
func TestCountMemoMatchesWalk(t *testing.T) {
	s := openTest(t, "")
	for i := 0; i < 500; i++ {
		put(t, s, fmt.Sprintf("c/%03d", i), "v")
	}
	v := s.idx.viewAt(s.Rev())
	rng := rand.New(rand.NewSource(3))
	ends := [][]byte{[]byte("c/400"), {0}, []byte("d"), []byte("c/050")}
	for round := 0; round < 200; round++ {
		end := ends[rng.Intn(len(ends))]
		for k := rng.Intn(100); k < 520; k += 1 + rng.Intn(60) {
			key := []byte(fmt.Sprintf("c/%03d", k))
			if got, want := v.count(key, end), v.walkCount(key, end); got != want {
				t.Fatalf("count(%s, %q) = %d, walk says %d", key, end, got, want)
			}
			if rng.Intn(5) == 0 { // another list's count in between
				other := []byte(fmt.Sprintf("c/%03d", rng.Intn(500)))
				if got, want := v.count(other, []byte{0}), v.walkCount(other, []byte{0}); got != want {
					t.Fatalf("count(%s, \\x00) = %d, walk says %d", other, got, want)
				}
			}
		}
	}
	// The same range counted twice in a row, and ranges from "\x00" (every
	// key, as a full read at an old revision asks): the memo's key equals the
	// next key, or is "\x00", which an etcd range end would read as "to the
	// end" (a bug once: counts of 0 and -1, and empty reads at old revisions).
	for _, end := range [][]byte{{0}, []byte("d")} {
		for _, key := range [][]byte{{0}, {0}, []byte("a"), []byte("c/100"), []byte("c/100"), {0}, []byte("c/499"), {0}} {
			if got, want := v.count(key, end), v.walkCount(key, end); got != want {
				t.Fatalf("count(%q, %q) = %d, walk says %d", key, end, got, want)
			}
		}
	}
}
