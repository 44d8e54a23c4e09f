package storee2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestEtcdctl drives the server with etcdctl 3.6 over TLS with client-cert
// auth and checks every answer exactly. Subtests share one server and run in
// order (compaction last but one: it removes history the others read).
func TestEtcdctl(t *testing.T) {
	bin := etcdctlBin(t)
	s := startServer(t, serverOptions{NoFsync: true, ExtraArgs: []string{"--watch-progress-notify-interval=1s"}})
	c := newCtl(t, bin, s.ClientURL, s.PKI.CAFile, &s.ClientPair)

	t.Run("PutGet", func(t *testing.T) { testPutGet(t, c.with(t)) })
	t.Run("Del", func(t *testing.T) { testDel(t, c.with(t)) })
	t.Run("Txn", func(t *testing.T) { testTxn(t, c.with(t)) })
	t.Run("Watch", func(t *testing.T) { testWatch(t, c.with(t), bin, s) })
	t.Run("WatchProgress", func(t *testing.T) { testWatchProgress(t, c.with(t), bin) })
	t.Run("Lease", func(t *testing.T) { testLease(t, c.with(t)) })
	t.Run("Compaction", func(t *testing.T) { testCompaction(t, c.with(t), bin, s) })
	t.Run("Endpoint", func(t *testing.T) { testEndpoint(t, c.with(t), s) })
	t.Run("Metrics", func(t *testing.T) { testMetrics(t, s) })
	t.Run("RefusesClientWithoutCert", func(t *testing.T) { testRefused(t, bin, s) })
}

func testPutGet(t *testing.T, c *ctl) {
	c.expect("OK\n", "put", "pg/a", "1")
	c.expect("OK\n", "put", "pg/b", "2")
	c.expect("OK\n", "put", "pg/c", "3")
	c.expect("OK\n", "put", "pg0", "outside the prefix")

	c.expect("pg/a\n1\npg/b\n2\npg/c\n3\n", "get", "pg/", "--prefix")
	c.expect("pg/b\n2\n", "get", "pg/b")
	c.expect("", "get", "pg/nothing")
	// A range [pg/a, pg/c) excludes its end.
	c.expect("pg/a\n1\npg/b\n2\n", "get", "pg/a", "pg/c")
	// --from-key: everything from pg/b on.
	c.expect("pg/b\n2\npg/c\n3\npg0\noutside the prefix\n", "get", "pg/b", "--from-key")

	r := c.get("pg/", "--prefix", "--limit", "2")
	if got := r.keys(); !slices.Equal(got, []string{"pg/a", "pg/b"}) || !r.More || r.Count != 3 {
		t.Fatalf("get --limit 2: keys %v more %v count %d; want [pg/a pg/b] more true count 3", got, r.More, r.Count)
	}
	if got := lines(c.ok("get", "pg/", "--prefix", "--keys-only")); !slices.Equal(got, []string{"pg/a", "pg/b", "pg/c"}) {
		t.Fatalf("get --keys-only: %v", got)
	}
	r = c.get("pg/", "--prefix", "--keys-only")
	for _, kv := range r.Kvs {
		if len(kv.Value) != 0 {
			t.Fatalf("get --keys-only -w json returned a value: %v", kv)
		}
	}
	if out := c.ok("get", "pg/", "--prefix", "--count-only", "-w", "fields"); !strings.Contains(out, `"Count" : 3`) || strings.Contains(out, `"Key"`) {
		t.Fatalf("get --count-only -w fields: %q; want Count 3 and no keys", out)
	}

	// Sorting: by modify revision descending, by value descending, by key descending.
	c.expect("OK\n", "put", "pg/a", "9") // pg/a is now the newest
	for _, tc := range []struct {
		by, order string
		want      []string
	}{
		{"MODIFY", "DESCEND", []string{"pg/a", "pg/c", "pg/b"}},
		{"MODIFY", "ASCEND", []string{"pg/b", "pg/c", "pg/a"}},
		{"CREATE", "DESCEND", []string{"pg/c", "pg/b", "pg/a"}},
		{"VALUE", "ASCEND", []string{"pg/b", "pg/c", "pg/a"}},
		{"KEY", "DESCEND", []string{"pg/c", "pg/b", "pg/a"}},
	} {
		got := c.get("pg/", "--prefix", "--sort-by="+tc.by, "--order="+tc.order).keys()
		if !slices.Equal(got, tc.want) {
			t.Fatalf("get --sort-by=%s --order=%s: %v; want %v", tc.by, tc.order, got, tc.want)
		}
	}
	// Ties in version may come in any order: only the first is determined.
	if got := c.get("pg/", "--prefix", "--sort-by=VERSION", "--order=DESCEND").keys(); len(got) != 3 || got[0] != "pg/a" {
		t.Fatalf("get --sort-by=VERSION --order=DESCEND: %v; want pg/a (version 2) first of 3", got)
	}
	// --limit applies after sorting.
	if got := c.get("pg/", "--prefix", "--sort-by=KEY", "--order=DESCEND", "--limit=1").keys(); !slices.Equal(got, []string{"pg/c"}) {
		t.Fatalf("get --sort-by=KEY --order=DESCEND --limit=1: %v; want [pg/c]", got)
	}

	// History: --rev reads the past; metadata is exact.
	r1 := c.put("pg/r", "v1")
	r2 := c.put("pg/r", "v2")
	if r2 != r1+1 {
		t.Fatalf("two puts: revisions %d then %d; want consecutive", r1, r2)
	}
	c.expect("pg/r\nv1\n", "get", "pg/r", "--rev", strconv.FormatInt(r1, 10))
	c.expect("", "get", "pg/r", "--rev", strconv.FormatInt(r1-1, 10))
	c.expect("pg/r\nv2\n", "get", "pg/r")
	r = c.get("pg/r")
	if len(r.Kvs) != 1 || r.Kvs[0].CreateRevision != r1 || r.Kvs[0].ModRevision != r2 || r.Kvs[0].Version != 2 || r.Header.Revision != r2 {
		t.Fatalf("get pg/r: %+v; want create %d mod %d version 2 at header revision %d", r, r1, r2, r2)
	}
	if r := c.get("pg/", "--prefix", "--rev", strconv.FormatInt(r1, 10)); r.Count != 4 || r.Header.Revision != r2 {
		t.Fatalf("get --prefix --rev %d: count %d header %d; want 4 keys with the current header revision %d", r1, r.Count, r.Header.Revision, r2)
	}
	if e := c.fails("get", "pg/r", "--rev", strconv.FormatInt(r2+100, 10)); !strings.Contains(e, "required revision is a future revision") {
		t.Fatalf("get at a future revision: stderr %q; want 'required revision is a future revision'", e)
	}
}

func testDel(t *testing.T, c *ctl) {
	for _, k := range []string{"del/a", "del/b", "del/c", "del/d"} {
		c.expect("OK\n", "put", k, "v-"+k)
	}
	c.expect("OK\n", "put", "dela", "outside the prefix")
	c.expect("4\n", "del", "del/", "--prefix")
	c.expect("", "get", "del/", "--prefix")
	c.expect("dela\noutside the prefix\n", "get", "dela")
	c.expect("0\n", "del", "del/", "--prefix")
	c.expect("0\n", "del", "del/missing")

	c.expect("OK\n", "put", "del/x", "last value")
	c.expect("1\ndel/x\nlast value\n", "del", "del/x", "--prev-kv")
	c.expect("", "get", "del/x")

	// Range delete [del/1, del/3) and --prev-kv over a prefix.
	for _, k := range []string{"del/1", "del/2", "del/3"} {
		c.expect("OK\n", "put", k, "v"+k[len(k)-1:])
	}
	c.expect("2\n", "del", "del/1", "del/3")
	c.expect("del/3\nv3\n", "get", "del/", "--prefix")
	c.expect("1\ndel/3\nv3\n", "del", "del/", "--prefix", "--prev-kv")

	// A key deleted and re-created starts a new generation: version 1, new create revision.
	first := c.put("del/gen", "a")
	c.expect("1\n", "del", "del/gen")
	second := c.put("del/gen", "b")
	r := c.get("del/gen")
	if len(r.Kvs) != 1 || r.Kvs[0].Version != 1 || r.Kvs[0].CreateRevision != second || second != first+2 {
		t.Fatalf("re-created key: %v; want version 1, create revision %d (first put at %d)", r.Kvs, second, first)
	}
}

func testTxn(t *testing.T, c *ctl) {
	rev := c.put("tx/k", "v1")
	cr := strconv.FormatInt(rev, 10)
	txn := fmt.Sprintf(`value("tx/k") = "v1"
version("tx/k") = "1"
create("tx/k") = "%s"
mod("tx/k") = "%s"
mod("tx/k") > "0"
version("tx/none") = "0"
value("tx/k") != "zzz"

put tx/k v2
get tx/k

put tx/failed yes

`, cr, cr)
	out := c.okIn(txn, "txn")
	if got := lines(out); !slices.Equal(got, []string{"SUCCESS", "OK", "tx/k", "v2"}) {
		t.Fatalf("txn with true compares: %q; want SUCCESS, OK, then tx/k v2", out)
	}
	c.expect("", "get", "tx/failed")
	r := c.get("tx/k")
	if len(r.Kvs) != 1 || r.Kvs[0].Version != 2 || r.Kvs[0].ModRevision != rev+1 {
		t.Fatalf("after txn: %v; want version 2 at revision %d", r.Kvs, rev+1)
	}

	// The same compares are now false: the failure branch runs.
	out = c.okIn(txn, "txn")
	if got := lines(out); !slices.Equal(got, []string{"FAILURE", "OK"}) {
		t.Fatalf("txn with false compares: %q; want FAILURE, OK", out)
	}
	c.expect("tx/failed\nyes\n", "get", "tx/failed")
	c.expect("tx/k\nv2\n", "get", "tx/k")

	// Each compare on its own decides: one false compare is enough to fail.
	mod := strconv.FormatInt(rev+1, 10)
	for _, tc := range []struct {
		cmp  string
		want string
	}{
		{`value("tx/k") = "v2"`, "SUCCESS"},
		{`value("tx/k") = "v1"`, "FAILURE"},
		{`value("tx/k") < "v3"`, "SUCCESS"},
		{`version("tx/k") = "2"`, "SUCCESS"},
		{`version("tx/k") > "2"`, "FAILURE"},
		{`create("tx/k") = "` + cr + `"`, "SUCCESS"},
		{`create("tx/k") < "` + cr + `"`, "FAILURE"},
		{`mod("tx/k") = "` + mod + `"`, "SUCCESS"},
		{`mod("tx/k") < "` + mod + `"`, "FAILURE"},
		{`create("tx/none") = "0"`, "SUCCESS"},
		{`mod("tx/none") = "0"`, "SUCCESS"},
	} {
		out := c.okIn(tc.cmp+"\n\nget tx/k\n\nget tx/failed\n\n", "txn")
		if got := lines(out); len(got) == 0 || got[0] != tc.want {
			t.Fatalf("txn %s: %q; want %s", tc.cmp, out, tc.want)
		}
	}

	// A txn with several writes is one revision; delete inside a txn.
	before := c.get("tx/k").Header.Revision
	out = c.okIn(`mod("tx/k") > "0"

put tx/m1 a
put tx/m2 b
del tx/failed


`, "txn") // an empty failure branch still ends with a blank line
	if got := lines(out); !slices.Equal(got, []string{"SUCCESS", "OK", "OK", "1"}) {
		t.Fatalf("multi-op txn: %q; want SUCCESS OK OK 1", out)
	}
	r = c.get("tx/m", "--prefix")
	if len(r.Kvs) != 2 || r.Kvs[0].ModRevision != before+1 || r.Kvs[1].ModRevision != before+1 || r.Header.Revision != before+1 {
		t.Fatalf("multi-op txn: %v at header %d; want both keys at revision %d", r.Kvs, r.Header.Revision, before+1)
	}
	c.expect("", "get", "tx/failed")
}

func testWatch(t *testing.T, c *ctl, bin string, s *server) {
	args := append(append([]string{}, c.base...), "watch", "wt/", "--prefix", "--prev-kv", "-w", "json")
	w := startBg(t, "etcdctl-watch", "", bin, args...)
	ch := watchStream(w.Stdout)

	// The watch is in place once it reports a sync key written after it started.
	synced := false
	for i := 0; i < 100 && !synced; i++ {
		c.put("wt/sync", strconv.Itoa(i))
		deadline := time.After(300 * time.Millisecond)
	drain:
		for {
			select {
			case resp := <-ch:
				for _, e := range resp.Events {
					if string(e.Kv.Key) == "wt/sync" {
						synced = true
					}
				}
			case <-deadline:
				break drain
			}
			if synced {
				break
			}
		}
	}
	if !synced {
		t.Fatalf("etcdctl watch never reported wt/sync")
	}
	skipSync := func(e jsonEvent) bool { return string(e.Kv.Key) == "wt/sync" }

	r1 := c.put("wt/a", "1")
	r2 := c.put("wt/a", "2")
	c.expect("OK\n", "put", "wt/b", "x")
	c.expect("OK\n", "put", "other", "not watched")
	c.expect("1\n", "del", "wt/a")
	r4 := c.get("wt/a").Header.Revision
	evs := nextEvents(t, ch, 4, 20*time.Second, skipSync)
	checkEvent(t, evs[0], false, "wt/a", "1", r1, nil)
	if evs[0].Kv.CreateRevision != r1 || evs[0].Kv.Version != 1 {
		t.Fatalf("create event %v: want create_revision == mod_revision == %d, version 1", evs[0], r1)
	}
	checkEvent(t, evs[1], false, "wt/a", "2", r2, ptr("1"))
	checkEvent(t, evs[2], false, "wt/b", "x", r2+1, nil)
	checkEvent(t, evs[3], true, "wt/a", "", r4, ptr("2"))
	w.Kill()

	// A watch from an old revision replays history first.
	args = append(append([]string{}, c.base...), "watch", "wt/a", "--rev", strconv.FormatInt(r1, 10), "--prev-kv", "-w", "json")
	h := startBg(t, "etcdctl-watch-rev", "", bin, args...)
	evs = nextEvents(t, watchStream(h.Stdout), 3, 20*time.Second, nil)
	checkEvent(t, evs[0], false, "wt/a", "1", r1, nil)
	checkEvent(t, evs[1], false, "wt/a", "2", r2, ptr("1"))
	checkEvent(t, evs[2], true, "wt/a", "", r4, ptr("2"))
	h.Kill()

	// The simple output of etcdctl watch, as people read it.
	args = append(append([]string{}, c.base...), "watch", "wt/b", "--rev", strconv.FormatInt(r2+1, 10))
	p := startBg(t, "etcdctl-watch-simple", "", bin, args...)
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 4096)
		var acc string
		for {
			n, err := p.Stdout.Read(buf)
			acc += string(buf[:n])
			if strings.Count(acc, "\n") >= 3 || err != nil {
				got <- acc
				return
			}
		}
	}()
	select {
	case out := <-got:
		if out != "PUT\nwt/b\nx\n" {
			t.Fatalf("etcdctl watch (simple): %q; want PUT, wt/b, x", out)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("etcdctl watch (simple) printed nothing in 20s")
	}
	p.Kill()
}

// testWatchProgress checks progress notifications, periodic (--progress-notify
// with the server's --watch-progress-notify-interval=1s) and requested
// (RequestProgress, which kube-apiserver sends for consistent reads from cache).
func testWatchProgress(t *testing.T, c *ctl, bin string) {
	cur := c.put("pn/x", "1")
	args := append(append([]string{}, c.base...), "watch", "pn/", "--prefix", "--progress-notify", "-w", "json")
	p := startBg(t, "etcdctl-watch-progress", "", bin, args...)
	ch := watchStream(p.Stdout)
	select {
	case w, ok := <-ch:
		if !ok || len(w.Events) != 0 || w.Canceled || w.CompactRevision != 0 || w.Header.Revision != cur {
			t.Fatalf("watch --progress-notify: first response %+v (open %v); want a progress notification at revision %d", w, ok, cur)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("watch --progress-notify: no progress notification in 15s (server interval 1s)")
	}
	p.Kill()

	// Interactive: a watch without --progress-notify gets progress only on request.
	// An os.Pipe, not io.Pipe: exec hands the file to the child, so Wait does
	// not wait on a copying goroutine that only ends when we close our end.
	in, inW, err := os.Pipe()
	if err != nil {
		t.Fatalf("stdin pipe: %v", err)
	}
	defer inW.Close()
	defer in.Close()
	args = append(append([]string{}, c.base...), "watch", "-i", "-w", "json")
	q := startBgStdin(t, "etcdctl-watch-interactive", in, bin, args...)
	ch = watchStream(q.Stdout)
	fmt.Fprintln(inW, "watch pn/ --prefix")
	var synced int64
	for i := 0; i < 100 && synced == 0; i++ {
		rev := c.put("pn/sync", strconv.Itoa(i))
		select {
		case w := <-ch:
			if len(w.Events) > 0 && string(w.Events[0].Kv.Key) == "pn/sync" {
				synced = rev
			}
		case <-time.After(300 * time.Millisecond):
		}
	}
	if synced == 0 {
		t.Fatalf("etcdctl watch -i: the watch never reported pn/sync")
	}
	// Drain events of earlier sync puts, then ask for progress.
	cur = c.get("pn/sync").Header.Revision
	for drained := false; !drained; {
		select {
		case <-ch:
		case <-time.After(500 * time.Millisecond):
			drained = true
		}
	}
	fmt.Fprintln(inW, "progress")
	select {
	case w := <-ch:
		if len(w.Events) != 0 || w.Canceled || w.Header.Revision != cur {
			t.Fatalf("RequestProgress: %+v; want a progress notification at revision %d", w, cur)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("RequestProgress: no answer in 15s")
	}
	q.Kill()
}

var leaseGranted = regexp.MustCompile(`^lease ([0-9a-f]+) granted with TTL\((\d+)s\)$`)

func testLease(t *testing.T, c *ctl) {
	out := strings.TrimSpace(c.ok("lease", "grant", "60"))
	m := leaseGranted.FindStringSubmatch(out)
	if m == nil || m[2] != "60" {
		t.Fatalf("lease grant 60: %q; want 'lease <hex id> granted with TTL(60s)'", out)
	}
	id := m[1]
	c.expect("OK\n", "put", "ls/a", "1", "--lease="+id)
	c.expect("OK\n", "put", "ls/b", "2", "--lease="+id)
	c.expect("OK\n", "put", "ls/c", "not leased")
	r := c.get("ls/a")
	if wantID, _ := strconv.ParseInt(id, 16, 64); len(r.Kvs) != 1 || r.Kvs[0].Lease != wantID {
		t.Fatalf("get ls/a: %v; want lease %s", r.Kvs, id)
	}

	c.expect("lease "+id+" keepalived with TTL(60)\n", "lease", "keep-alive", "--once", id)

	ttl := strings.TrimSpace(c.ok("lease", "timetolive", id, "--keys"))
	re := regexp.MustCompile(`^lease ` + id + ` granted with TTL\(60s\), remaining\((\d+)s\), attached keys\(\[(.*)\]\)$`)
	m = re.FindStringSubmatch(ttl)
	if m == nil {
		t.Fatalf("lease timetolive --keys: %q; want granted TTL(60s), remaining(N s), attached keys([ls/a ls/b])", ttl)
	}
	keys := strings.Fields(m[2])
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"ls/a", "ls/b"}) {
		t.Fatalf("lease timetolive --keys: attached keys %v; want ls/a and ls/b (any order)", keys)
	}
	if rem, _ := strconv.Atoi(m[1]); rem < 50 || rem > 60 {
		t.Fatalf("lease timetolive: remaining %ds; want 50..60", rem)
	}

	if got := lines(c.ok("lease", "list")); len(got) < 2 || !strings.HasPrefix(got[0], "found ") || !slices.Contains(got[1:], id) {
		t.Fatalf("lease list: %v; want 'found N leases' and %s", got, id)
	}

	c.expect("lease "+id+" revoked\n", "lease", "revoke", id)
	c.expect("ls/c\nnot leased\n", "get", "ls/", "--prefix")
	if got := lines(c.ok("lease", "list")); slices.Contains(got, id) {
		t.Fatalf("lease list after revoke still has %s: %v", id, got)
	}
	c.expect("lease "+id+" already expired\n", "lease", "timetolive", id)
	if e := c.fails("lease", "keep-alive", "--once", id); !strings.Contains(e, "requested lease not found") {
		t.Fatalf("keep-alive of a revoked lease: stderr %q; want 'requested lease not found'", e)
	}
	if e := c.fails("put", "ls/d", "x", "--lease="+id); !strings.Contains(e, "requested lease not found") {
		t.Fatalf("put with a revoked lease: stderr %q; want 'requested lease not found'", e)
	}

	// A lease that is not kept alive expires by itself and takes its keys along
	// (kube-apiserver's Events and endpoint leases rely on it).
	m = leaseGranted.FindStringSubmatch(strings.TrimSpace(c.ok("lease", "grant", "2")))
	if m == nil {
		t.Fatalf("lease grant 2 failed")
	}
	c.expect("OK\n", "put", "ls/short", "x", "--lease="+m[1])
	deadline := time.Now().Add(20 * time.Second)
	for c.ok("get", "ls/short") != "" {
		if time.Now().After(deadline) {
			t.Fatalf("key on a 2s lease still present after 20s")
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func testCompaction(t *testing.T, c *ctl, bin string, s *server) {
	r1 := c.put("cp/k", "v1")
	r2 := c.put("cp/k", "v2")
	c.put("cp/k", "v3")
	rs := strconv.FormatInt(r2, 10)
	c.expect("compacted revision "+rs+"\n", "compaction", rs)

	e := c.fails("get", "cp/k", "--rev", strconv.FormatInt(r1, 10))
	if !strings.Contains(e, "required revision has been compacted") {
		t.Fatalf("get below the compacted revision: stderr %q; want 'required revision has been compacted'", e)
	}
	c.expect("cp/k\nv2\n", "get", "cp/k", "--rev", rs)
	c.expect("cp/k\nv3\n", "get", "cp/k")
	if e := c.fails("compaction", strconv.FormatInt(r1, 10)); !strings.Contains(e, "required revision has been compacted") {
		t.Fatalf("compaction below the compacted revision: stderr %q; want 'required revision has been compacted'", e)
	}
	if e := c.fails("compaction", strconv.FormatInt(r2+1000, 10)); !strings.Contains(e, "required revision is a future revision") {
		t.Fatalf("compaction at a future revision: stderr %q; want 'required revision is a future revision'", e)
	}

	// A watch from a compacted revision is canceled with the compact revision.
	args := append(append([]string{}, c.base...), "watch", "cp/k", "--rev", strconv.FormatInt(r1, 10), "-w", "json")
	w := startBg(t, "etcdctl-watch-compacted", "", bin, args...)
	ch := watchStream(w.Stdout)
	select {
	case resp, ok := <-ch:
		if !ok || !resp.Canceled || resp.CompactRevision != r2 {
			t.Fatalf("watch from compacted revision %d: %+v (open %v); want canceled with compact revision %d", r1, resp, ok, r2)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("watch from compacted revision %d: no response in 20s", r1)
	}
	w.Kill()
}

func testEndpoint(t *testing.T, c *ctl, s *server) {
	var st []struct {
		Endpoint string
		Status   struct {
			Header  jsonHeader `json:"header"`
			Version string     `json:"version"`
			DbSize  int64      `json:"dbSize"`
			Leader  uint64     `json:"leader"`
		}
	}
	c.jsonOut(&st, "endpoint", "status")
	cur := c.get("pg/a").Header.Revision
	if len(st) != 1 || st[0].Endpoint != s.ClientURL {
		t.Fatalf("endpoint status: %+v; want one status for %s", st, s.ClientURL)
	}
	got := st[0].Status
	if !versionAtLeast(got.Version, 3, 4, 31) || strings.HasPrefix(got.Version, "3.5.") && !versionAtLeast(got.Version, 3, 5, 13) {
		t.Fatalf("endpoint status version %q: kube-apiserver wants semver >= 3.4.31 and not in [3.5.0, 3.5.13)", got.Version)
	}
	if got.DbSize <= 0 || got.Header.Revision < cur || got.Header.Revision == 0 {
		t.Fatalf("endpoint status: %+v; want dbSize > 0, revision >= %d", got, cur)
	}
	if got.Leader == 0 || got.Leader != got.Header.MemberID && s.cluster == nil {
		t.Fatalf("endpoint status: leader %d member %d; a single member must be its own leader", got.Leader, got.Header.MemberID)
	}

	out := c.ok("endpoint", "health")
	if !strings.HasPrefix(out, s.ClientURL+" is healthy: successfully committed proposal") {
		t.Fatalf("endpoint health: %q; want '%s is healthy: successfully committed proposal...'", out, s.ClientURL)
	}

	var ml struct {
		Header  jsonHeader `json:"header"`
		Members []struct {
			ID         uint64   `json:"ID"`
			Name       string   `json:"name"`
			ClientURLs []string `json:"clientURLs"`
			IsLearner  bool     `json:"isLearner"`
		} `json:"members"`
	}
	c.jsonOut(&ml, "member", "list")
	if s.cluster != nil {
		// Cluster mode (QK_STORE_MEMBERS): this member, sorted first by the
		// store (ids in order) or not; check it is listed with its URL.
		if len(ml.Members) != len(s.cluster.Members) {
			t.Fatalf("member list: %+v; want %d members", ml.Members, len(s.cluster.Members))
		}
		for i, m := range ml.Members {
			if m.ID == got.Header.MemberID {
				ml.Members[0], ml.Members[i] = ml.Members[i], ml.Members[0]
			}
		}
		ml.Members = ml.Members[:1]
	}
	if len(ml.Members) != 1 || ml.Members[0].Name != s.Name || !slices.Equal(ml.Members[0].ClientURLs, []string{s.ClientURL}) || ml.Members[0].IsLearner {
		t.Fatalf("member list: %+v; want one voting member %s with client URL %s", ml.Members, s.Name, s.ClientURL)
	}
	if ml.Members[0].ID != got.Header.MemberID || ml.Members[0].ID == 0 {
		t.Fatalf("member list ID %x differs from the status header's member_id %x", ml.Members[0].ID, got.Header.MemberID)
	}
	simple := c.ok("member", "list")
	if want := fmt.Sprintf("%x, started, %s, ", ml.Members[0].ID, s.Name); !strings.Contains(simple, want) || !strings.Contains(simple, s.ClientURL) || s.cluster == nil && !strings.HasPrefix(simple, want) {
		t.Fatalf("member list: %q; want it to start with %q and name %s", simple, want, s.ClientURL)
	}
}

// versionAtLeast parses "X.Y.Z[-suffix]" and compares it with maj.min.patch.
func versionAtLeast(v string, maj, min, patch int) bool {
	core, _, _ := strings.Cut(v, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return false
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil {
			return false
		}
		n[i] = x
	}
	return slices.Compare(n[:], []int{maj, min, patch}) >= 0
}

func testMetrics(t *testing.T, s *server) {
	hc := &http.Client{Timeout: 10 * time.Second}
	for _, path := range []string{"/health", "/readyz", "/metrics"} {
		resp, err := hc.Get(s.MetricsURL + path)
		if err != nil {
			t.Fatalf("GET %s%s: %v", s.MetricsURL, path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: status %d body %q; want 200", path, resp.StatusCode, body)
		}
		if path == "/health" {
			var h struct{ Health string }
			if err := json.Unmarshal(body, &h); err != nil || h.Health != "true" {
				t.Fatalf("GET /health: %q; want {\"health\":\"true\"...}", body)
			}
		}
		if path == "/metrics" && !strings.Contains(string(body), "# TYPE ") {
			t.Fatalf("GET /metrics: no Prometheus text in %d bytes", len(body))
		}
	}
}

func testRefused(t *testing.T, bin string, s *server) {
	dir := t.TempDir()
	other := newPKI(t, filepath.Join(dir, "other"), "untrusted-ca")
	stranger := other.issue(t, "stranger", certSpec{CN: "root", Client: true})
	for _, tc := range []struct {
		name string
		c    *ctl
	}{
		{"no client certificate", newCtl(t, bin, s.ClientURL, s.PKI.CAFile, nil)},
		{"certificate from an untrusted CA", newCtl(t, bin, s.ClientURL, s.PKI.CAFile, &stranger)},
		{"plaintext", newCtl(t, bin, "http://"+hostPort(s.ClientURL), s.PKI.CAFile, nil)},
	} {
		r := tc.c.run("", "--dial-timeout=2s", "--command-timeout=3s", "put", "refused/k", "v")
		if r.Err == nil || !isExit(r.Err) {
			t.Fatalf("%s: put was not refused: %s", tc.name, r)
		}
	}
	c := newCtl(t, bin, s.ClientURL, s.PKI.CAFile, &s.ClientPair)
	c.t = t
	c.expect("", "get", "refused/", "--prefix")
}
