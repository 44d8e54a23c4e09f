package snapshot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/backend"
	etcdmvcc "go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"
)

// openWithEtcd opens a snapshot file (hash stripped, as etcdutl does) with
// etcd's own backend, lessor and mvcc store: the code etcd runs on a
// restored data dir.
func openWithEtcd(t *testing.T, path string) (etcdmvcc.WatchableKV, lease.Lessor) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(db, data[:len(data)-HashSize], 0o600); err != nil {
		t.Fatal(err)
	}
	be := backend.NewDefaultBackend(zap.NewNop(), db)
	le := lease.NewLessor(zap.NewNop(), be, nil, lease.LessorConfig{MinLeaseTTL: 1})
	kv := etcdmvcc.New(zap.NewNop(), be, le, etcdmvcc.StoreConfig{})
	t.Cleanup(func() {
		kv.Close()
		le.Stop()
		be.Close()
	})
	return kv, le
}

// TestEtcdReadsTheFile: etcd's own mvcc store, started on the file, is at
// the store's revision and compacted revision, answers Ranges at older
// revisions with the store's key-values, replays the store's changes to a
// watch from compacted+1, and has the store's lease with its keys.
func TestEtcdReadsTheFile(t *testing.T) {
	h := buildStore(t)
	path, _ := take(t, h.s)
	kv, le := openWithEtcd(t, path)
	ctx := context.Background()
	if kv.Rev() != h.s.Rev() {
		t.Fatalf("etcd at revision %d, store at %d", kv.Rev(), h.s.Rev())
	}
	for _, rev := range h.revsToCompare {
		r, err := kv.Range(ctx, []byte{0}, []byte{}, etcdmvcc.RangeOptions{Rev: rev})
		if err != nil {
			t.Fatalf("etcd range at %d: %v", rev, err)
		}
		sameKVs(t, fmt.Sprintf("etcd range at %d", rev), r.KVs, rangeAll(t, h.s, rev))
	}
	if _, err := kv.Range(ctx, []byte("/a"), nil, etcdmvcc.RangeOptions{Rev: h.compacted - 1}); err != etcdmvcc.ErrCompacted {
		t.Fatalf("etcd range below the compacted revision: %v", err)
	}
	want := exportChanges(t, h.s)
	got := watchAll(t, kv, h.compacted+1, h.s.Rev())
	if len(got) != len(want) {
		t.Fatalf("etcd watch from %d replayed %d events, want %d", h.compacted+1, len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Type != w.Type {
			t.Fatalf("event %d: %v, want %v", i, g.Type, w.Type)
		}
		if w.Type == mvccpb.DELETE {
			if string(g.Kv.Key) != string(w.KV.Key) || g.Kv.ModRevision != w.KV.ModRevision {
				t.Fatalf("event %d: delete %q at %d, want %q at %d", i, g.Kv.Key, g.Kv.ModRevision, w.KV.Key, w.KV.ModRevision)
			}
			continue
		}
		sameKVs(t, fmt.Sprintf("event %d", i), []*mvccpb.KeyValue{g.Kv}, []*mvccpb.KeyValue{w.KV})
	}
	l := le.Lookup(testLease)
	if l == nil || l.TTL() != 300 || len(l.Keys()) != 1 || l.Keys()[0] != "/b" {
		t.Fatalf("etcd lease %x: %+v", testLease, l)
	}
}

// watchAll collects the events of a watch on every key from rev from until
// one at rev to arrives.
func watchAll(t *testing.T, kv etcdmvcc.WatchableKV, from, to int64) []*mvccpb.Event {
	t.Helper()
	ws := kv.NewWatchStream()
	defer ws.Close()
	if _, err := ws.Watch(context.Background(), 0, []byte{0}, []byte{}, from); err != nil {
		t.Fatal(err)
	}
	var evs []*mvccpb.Event
	timeout := time.After(30 * time.Second)
	for {
		select {
		case r := <-ws.Chan():
			evs = append(evs, r.Events...)
			if len(evs) > 0 && evs[len(evs)-1].Kv.ModRevision >= to {
				return evs
			}
		case <-timeout:
			t.Fatalf("etcd watch from %d: %d events after 30s, none at %d yet", from, len(evs), to)
		}
	}
}

// TestEtcdRevisionMarker: etcd's current revision is the store's when the
// newest revisions changed no key.
func TestEtcdRevisionMarker(t *testing.T) {
	h := buildStore(t)
	if err := h.s.SetRevision(context.Background(), h.s.Rev()+7); err != nil {
		t.Fatal(err)
	}
	path, _ := take(t, h.s)
	kv, _ := openWithEtcd(t, path)
	if kv.Rev() != h.s.Rev() {
		t.Fatalf("etcd at revision %d, store at %d", kv.Rev(), h.s.Rev())
	}
	r, err := kv.Range(context.Background(), []byte{0}, []byte{}, etcdmvcc.RangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameKVs(t, "etcd range", r.KVs, rangeAll(t, h.s, 0))
}
