package storee2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// snapHistory is what populate wrote: the revisions a restored server must
// answer at exactly as the source does.
type snapHistory struct {
	Compacted, Mid, Rev int64
}

// populate writes a history with every kind of change a snapshot must
// carry: keys on two leases, several versions, deletes and re-creates,
// multi-op txns (several changes in one revision), a key with a NUL byte,
// values of many sizes, a physical compaction, and changes after it (the
// last revision being a txn with puts and a delete).
func populate(t *testing.T, c *clientv3.Client, keys int) snapHistory {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("populate: %s: %v", what, err)
		}
	}
	l1, err := c.Grant(ctx, 600)
	must("grant", err)
	l2, err := c.Grant(ctx, 300)
	must("grant", err)
	key := func(i int) string { return fmt.Sprintf("/snap/k%05d", i) }
	val := func(i, v int) string { return fmt.Sprintf("v%d-%d-", i, v) + strings.Repeat("x", (i%7)*150) }
	for i := 0; i < keys; i += 50 { // 50 keys a txn: one revision, 50 sub-revisions
		var ops []clientv3.Op
		for j := i; j < min(i+50, keys); j++ {
			var opts []clientv3.OpOption
			if j%10 == 0 {
				opts = append(opts, clientv3.WithLease(l1.ID))
			}
			ops = append(ops, clientv3.OpPut(key(j), val(j, 1), opts...))
		}
		_, err := c.Txn(ctx).Then(ops...).Commit()
		must("txn put", err)
	}
	for i := 0; i < keys; i += 3 {
		_, err := c.Put(ctx, key(i), val(i, 2))
		must("update", err)
	}
	for i := 0; i < keys; i += 11 {
		_, err := c.Delete(ctx, key(i))
		must("delete", err)
	}
	_, err = c.Put(ctx, "/snap/nul\x00key", "nul")
	must("put nul key", err)
	_, err = c.Txn(ctx).Then(clientv3.OpPut("/snap/t/a", "a"), clientv3.OpPut("/snap/t/b", "b"), clientv3.OpDelete(key(1))).Commit()
	must("txn", err)
	h := snapHistory{}
	r, err := c.Put(ctx, "/snap/last-before-compaction", "x")
	must("put", err)
	h.Compacted = r.Header.Revision
	_, err = c.Compact(ctx, h.Compacted, clientv3.WithCompactPhysical())
	must("compact", err)
	populateAfterCompaction(t, ctx, c, keys, l2.ID, &h, must)
	return h
}

func populateAfterCompaction(t *testing.T, ctx context.Context, c *clientv3.Client, keys int, lease clientv3.LeaseID, h *snapHistory, must func(string, error)) {
	t.Helper()
	key := func(i int) string { return fmt.Sprintf("/snap/k%05d", i) }
	for i := 0; i < keys; i += 13 {
		_, err := c.Put(ctx, key(i), fmt.Sprintf("after-%d", i)) // updates, and re-creates of deleted keys
		must("update after compaction", err)
	}
	_, err := c.Delete(ctx, key(10)) // a key of lease 1
	must("delete", err)
	r, err := c.Put(ctx, "/snap/on-lease-2", "l2", clientv3.WithLease(lease))
	must("put on lease 2", err)
	h.Mid = r.Header.Revision
	_, err = c.Delete(ctx, "/snap/t/", clientv3.WithPrefix())
	must("delete prefix", err)
	for i := 0; i < 20; i++ {
		_, err := c.Put(ctx, "/snap/hot", fmt.Sprint(i))
		must("hot key", err)
	}
	tr, err := c.Txn(ctx).Then(clientv3.OpPut("/snap/z1", "1"), clientv3.OpPut("/snap/z2", "2", clientv3.WithLease(lease)), clientv3.OpDelete(key(2))).Commit()
	must("final txn", err)
	h.Rev = tr.Header.Revision
}

// getAll reads every key at rev (0: current) and the header revision.
func getAll(t *testing.T, c *clientv3.Client, rev int64) ([]*mvccpb.KeyValue, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithFromKey()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	r, err := c.Get(ctx, "\x00", opts...)
	if err != nil {
		t.Fatalf("get every key at revision %d: %v", rev, err)
	}
	return r.Kvs, r.Header.Revision
}

func kvString(kv *mvccpb.KeyValue) string {
	if kv == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q=%.40q c=%d m=%d v=%d lease=%x", kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease)
}

func sameKV(a, b *mvccpb.KeyValue) bool {
	if a == nil || b == nil {
		return a == b
	}
	return bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value) && a.CreateRevision == b.CreateRevision &&
		a.ModRevision == b.ModRevision && a.Version == b.Version && a.Lease == b.Lease
}

// compareAt fails unless both servers hold exactly the same key-values at rev.
func compareAt(t *testing.T, got, want *clientv3.Client, rev int64) int {
	t.Helper()
	g, _ := getAll(t, got, rev)
	w, _ := getAll(t, want, rev)
	if len(g) != len(w) {
		t.Fatalf("at revision %d: restored server has %d keys, source %d", rev, len(g), len(w))
	}
	for i := range w {
		if !sameKV(g[i], w[i]) {
			t.Fatalf("at revision %d, key %d: restored %s, source %s", rev, i, kvString(g[i]), kvString(w[i]))
		}
	}
	return len(w)
}

// watchEvents collects the events of a watch on every key, with prev_kv,
// from revision from until the responses reach revision to.
func watchEvents(t *testing.T, c *clientv3.Client, from, to int64) []*clientv3.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var evs []*clientv3.Event
	for resp := range c.Watch(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(from), clientv3.WithPrevKV()) {
		if err := resp.Err(); err != nil {
			t.Fatalf("watch from %d: %v", from, err)
		}
		evs = append(evs, resp.Events...)
		if n := len(evs); n > 0 && evs[n-1].Kv.ModRevision >= to {
			return evs
		}
	}
	t.Fatalf("watch from %d ended after %d events without reaching revision %d", from, len(evs), to)
	return nil
}

// compareWatch fails unless a watch from from replays the same events, with
// the same previous key-values, on both servers.
func compareWatch(t *testing.T, got, want *clientv3.Client, from, to int64) int {
	t.Helper()
	w := watchEvents(t, want, from, to)
	g := watchEvents(t, got, from, to)
	if len(g) != len(w) {
		t.Fatalf("watch from %d: restored server replayed %d events, source %d", from, len(g), len(w))
	}
	for i := range w {
		if g[i].Type != w[i].Type || !sameKV(g[i].Kv, w[i].Kv) || !sameKV(g[i].PrevKv, w[i].PrevKv) {
			t.Fatalf("watch from %d, event %d: restored %v %s (prev %s), source %v %s (prev %s)", from, i,
				g[i].Type, kvString(g[i].Kv), kvString(g[i].PrevKv), w[i].Type, kvString(w[i].Kv), kvString(w[i].PrevKv))
		}
	}
	return len(w)
}

// compareLeases fails unless both servers have the same leases, granted
// TTLs and attached keys, each with time left.
func compareLeases(t *testing.T, got, want *clientv3.Client) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	describe := func(c *clientv3.Client) map[clientv3.LeaseID]string {
		ls, err := c.Leases(ctx)
		if err != nil {
			t.Fatalf("list leases: %v", err)
		}
		out := map[clientv3.LeaseID]string{}
		for _, l := range ls.Leases {
			ttl, err := c.TimeToLive(ctx, l.ID, clientv3.WithAttachedKeys())
			if err != nil {
				t.Fatalf("lease %x: %v", l.ID, err)
			}
			if ttl.TTL <= 0 || ttl.TTL > ttl.GrantedTTL {
				t.Fatalf("lease %x has %d s left of %d", l.ID, ttl.TTL, ttl.GrantedTTL)
			}
			keys := make([]string, 0, len(ttl.Keys))
			for _, k := range ttl.Keys {
				keys = append(keys, string(k))
			}
			slices.Sort(keys)
			out[l.ID] = fmt.Sprintf("granted %d keys %q", ttl.GrantedTTL, keys)
		}
		return out
	}
	g, w := describe(got), describe(want)
	if fmt.Sprint(g) != fmt.Sprint(w) {
		t.Fatalf("leases: restored %v, source %v", g, w)
	}
	return len(w)
}

// verifyRestored compares a restored server with its source: the current
// revision, every key at the compacted, a middle and the current revision,
// ErrCompacted below the compacted revision, the leases, and a watch from
// the compacted revision + 1.
func verifyRestored(t *testing.T, dst, src *server, h snapHistory) {
	t.Helper()
	g, w := dst.Client(), src.Client()
	defer g.Close()
	defer w.Close()
	if _, rev := getAll(t, g, 0); rev != h.Rev {
		t.Fatalf("restored server is at revision %d, source was at %d", rev, h.Rev)
	}
	var counts []string
	for _, rev := range []int64{h.Compacted, h.Mid, h.Rev} {
		counts = append(counts, fmt.Sprintf("%d keys at %d", compareAt(t, g, w, rev), rev))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := g.Get(ctx, "/snap/hot", clientv3.WithRev(h.Compacted-1)); err != rpctypes.ErrCompacted {
		t.Fatalf("get below the compacted revision %d on the restored server: %v, want %v", h.Compacted, err, rpctypes.ErrCompacted)
	}
	leases := compareLeases(t, g, w)
	events := compareWatch(t, g, w, h.Compacted+1, h.Rev)
	t.Logf("restored %s matches its source: %s; %d leases; a watch from %d replays the same %d events", dst.Kind, strings.Join(counts, ", "), leases, h.Compacted+1, events)
}

// snapshotSave runs `etcdctl snapshot save` against s into a new file.
func snapshotSave(t *testing.T, s *server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "snapshot.db")
	c := newCtl(t, etcdctlBin(t), s.ClientURL, s.PKI.CAFile, &s.ClientPair)
	start := time.Now()
	c.ok("snapshot", "save", path)
	t.Logf("etcdctl snapshot save from %s took %v", s.Kind, time.Since(start).Round(time.Millisecond))
	return path
}

// etcdutlStatus is `etcdutl snapshot status -w json`.
type etcdutlStatus struct {
	Hash      uint32 `json:"hash"`
	Revision  int64  `json:"revision"`
	TotalKey  int    `json:"totalKey"`
	TotalSize int64  `json:"totalSize"`
	Version   string `json:"version"`
}

func snapshotStatus(t *testing.T, path string) etcdutlStatus {
	t.Helper()
	r := runCmd("", etcdutlBin(t), nil, "snapshot", "status", path, "-w", "json")
	if r.Err != nil {
		t.Fatalf("etcdutl snapshot status %s:\n%s", path, r)
	}
	var st etcdutlStatus
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
		t.Fatalf("decode etcdutl snapshot status output %q: %v", r.Stdout, err)
	}
	return st
}
