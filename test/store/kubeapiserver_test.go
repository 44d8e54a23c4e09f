package storee2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// kubeEventTTL is kube-apiserver's --event-ttl: Events are stored on a lease
// of about this TTL and must disappear when it expires.
const kubeEventTTL = 20 * time.Second

// kubeCompactionInterval is kube-apiserver's --etcd-compaction-interval,
// short so that the test sees the apiserver's compactor at work.
const kubeCompactionInterval = 10 * time.Second

// TestKubeAPIServer runs a real kube-apiserver v1.36 on the server (TLS,
// client-cert auth) and exercises it with kubectl: CRUD with watch, patches
// and a stale update, namespace deletion (with kube-controller-manager's
// namespace controller), and an Event that expires through its lease.
func TestKubeAPIServer(t *testing.T) {
	apiserverBin := kubeAPIServerBin(t)
	kcmBin := kubeControllerManagerBin(t)
	k := &kubectl{t: t, bin: kubectlBin(t)}
	s := startServer(t, serverOptions{})

	start := time.Now()
	api := startKubeAPIServer(t, apiserverBin, s, kubeEventTTL, kubeCompactionInterval)
	k.kubeconfig = api.Kubeconfig
	kcmLog := filepath.Join(t.TempDir(), "kube-controller-manager.log")
	startBg(t, "kube-controller-manager", kcmLog, kcmBin,
		"--kubeconfig="+api.Kubeconfig,
		"--controllers=namespace-controller",
		"--leader-elect=false",
		"--secure-port=0",
	)

	// The Event goes first: its TTL runs while the other steps do.
	t.Run("EventCreate", func(t *testing.T) { createEvent(t, k.with(t), s) })
	eventCreated := time.Now()
	t.Run("CRUDAndWatch", func(t *testing.T) { testKubeCRUD(t, k.with(t), s) })
	t.Run("NamespaceDeletion", func(t *testing.T) { testNamespaceDeletion(t, k.with(t), s) })
	t.Run("EventExpires", func(t *testing.T) { testEventExpires(t, k.with(t), s, eventCreated) })
	t.Run("CompactionByAPIServer", func(t *testing.T) { testKubeCompaction(t, k.with(t), s) })
	t.Run("StoreKilledUnderAPIServer", func(t *testing.T) { testStoreRestartUnderKube(t, k.with(t), s, api) })
	t.Run("APIServerLogClean", func(t *testing.T) { testAPIServerLog(t, api) })
	t.Logf("kube-apiserver test done in %v", time.Since(start).Round(time.Millisecond))
}

func (k *kubectl) with(t *testing.T) *kubectl {
	return &kubectl{t: t, bin: k.bin, kubeconfig: k.kubeconfig}
}

// storeKey reads one key of the server directly (kube-apiserver's prefix is /registry).
func storeKey(t *testing.T, s *server, key string) (*clientv3.GetResponse, error) {
	cli := s.Client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cli.Get(ctx, key)
}

// storeCount counts the keys under prefix.
func storeCount(t *testing.T, s *server, prefix string) int64 {
	t.Helper()
	cli := s.Client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("count %s in the store: %v", prefix, err)
	}
	return r.Count
}

const eventYAML = `apiVersion: v1
kind: Event
metadata:
  name: qk-event
  namespace: default
involvedObject:
  apiVersion: v1
  kind: ConfigMap
  name: qk-cm
  namespace: default
reason: QKTest
message: stored on a lease; must expire
type: Normal
source:
  component: qk-e2e
`

func createEvent(t *testing.T, k *kubectl, s *server) {
	if out := strings.TrimSpace(k.okIn(eventYAML, "create", "-f", "-", "-o", "name")); out != "event/qk-event" {
		t.Fatalf("kubectl create event: %q; want event/qk-event", out)
	}
	// kube-apiserver stores it with a lease of about --event-ttl.
	r, err := storeKey(t, s, "/registry/events/default/qk-event")
	if err != nil || len(r.Kvs) != 1 || r.Kvs[0].Lease == 0 {
		t.Fatalf("store key /registry/events/default/qk-event: %v %v; want one key on a lease", r, err)
	}
	cli := s.Client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(r.Kvs[0].Lease), clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatalf("lease of the event: %v", err)
	}
	if ttl.TTL <= 0 || ttl.GrantedTTL < int64(kubeEventTTL.Seconds()) || ttl.GrantedTTL > int64(kubeEventTTL.Seconds())+60 {
		t.Fatalf("lease of the event: granted TTL %ds, remaining %ds; want about %v", ttl.GrantedTTL, ttl.TTL, kubeEventTTL)
	}
	t.Logf("event on lease %x: granted TTL %ds, remaining %ds, %d keys attached", r.Kvs[0].Lease, ttl.GrantedTTL, ttl.TTL, len(ttl.Keys))
}

func testKubeCRUD(t *testing.T, k *kubectl, s *server) {
	k.expect("configmap/qk-cm created", "create", "configmap", "qk-cm", "--from-literal=a=1")

	// A watch started now lists qk-cm (ADDED) and then sees every change.
	w := startBg(t, "kubectl-watch", "", k.bin, "--kubeconfig", k.kubeconfig,
		"get", "configmaps", "--field-selector=metadata.name=qk-cm", "--watch", "--output-watch-events", "-o", "json")
	events := make(chan kubeWatchEvent, 64)
	go func() {
		defer close(events)
		dec := json.NewDecoder(w.Stdout)
		for {
			var e kubeWatchEvent
			if err := dec.Decode(&e); err != nil {
				return
			}
			events <- e
		}
	}()
	first := nextKubeEvent(t, events)
	if first.Type != "ADDED" || first.Object.Data["a"] != "1" {
		t.Fatalf("kubectl get -w: first event %+v; want ADDED qk-cm with a=1", first)
	}

	out := k.ok("get", "configmap", "qk-cm", "-o", "yaml")
	for _, want := range []string{"name: qk-cm", `a: "1"`, "namespace: default", "resourceVersion:"} {
		if !strings.Contains(out, want) {
			t.Fatalf("kubectl get -o yaml: no %q in:\n%s", want, out)
		}
	}
	if out := k.ok("get", "configmaps", "-o", "name"); !slices.Contains(lines(out), "configmap/qk-cm") {
		t.Fatalf("kubectl get configmaps: %q; want configmap/qk-cm", out)
	}

	// Update by replace, with the object as read (its resourceVersion).
	var cm map[string]any
	if err := json.Unmarshal([]byte(k.ok("get", "configmap", "qk-cm", "-o", "json")), &cm); err != nil {
		t.Fatalf("decode configmap: %v", err)
	}
	stale, _ := json.Marshal(cm) // keeps the old resourceVersion
	cm["data"].(map[string]any)["a"] = "2"
	updated, _ := json.Marshal(cm)
	if out := strings.TrimSpace(k.okIn(string(updated), "replace", "-f", "-", "-o", "name")); out != "configmap/qk-cm" {
		t.Fatalf("kubectl replace: %q", out)
	}
	k.expect("2", "get", "configmap", "qk-cm", "-o", "jsonpath={.data.a}")
	// A stale resourceVersion is a conflict (the store's compare on mod_revision fails).
	if r := k.run(string(stale), "replace", "-f", "-"); r.Err == nil || !strings.Contains(r.Stderr, "the object has been modified") {
		t.Fatalf("kubectl replace with a stale resourceVersion: want a Conflict, got:\n%s", r)
	}

	k.expect("configmap/qk-cm patched", "patch", "configmap", "qk-cm", "--type=merge", "-p", `{"data":{"b":"x"}}`)
	k.expect("2 x", "get", "configmap", "qk-cm", "-o", "jsonpath={.data.a} {.data.b}")
	k.expect("configmap/qk-cm patched", "patch", "configmap", "qk-cm", "--type=json",
		"-p", `[{"op":"replace","path":"/data/a","value":"3"},{"op":"remove","path":"/data/b"}]`)
	k.expect(`{"a":"3"}`, "get", "configmap", "qk-cm", "-o", "jsonpath={.data}")

	// The object is in the store under kube-apiserver's key.
	if r, err := storeKey(t, s, "/registry/configmaps/default/qk-cm"); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("store key /registry/configmaps/default/qk-cm: %v %v; want one key", r, err)
	}

	k.expect(`configmap "qk-cm" deleted`, "delete", "configmap", "qk-cm")
	if !k.notFound("configmap", "qk-cm") {
		t.Fatalf("kubectl get configmap qk-cm after delete: still there")
	}
	if r, err := storeKey(t, s, "/registry/configmaps/default/qk-cm"); err != nil || len(r.Kvs) != 0 {
		t.Fatalf("store key /registry/configmaps/default/qk-cm after delete: %v %v; want none", r, err)
	}

	// The watch saw every change, in order, with growing resourceVersions.
	want := []struct{ typ, data string }{
		{"MODIFIED", `{"a":"2"}`},
		{"MODIFIED", `{"a":"2","b":"x"}`},
		{"MODIFIED", `{"a":"3"}`},
		{"DELETED", `{"a":"3"}`},
	}
	prevRV := first.Object.Metadata.ResourceVersion
	for i, wnt := range want {
		e := nextKubeEvent(t, events)
		data, _ := json.Marshal(e.Object.Data)
		if e.Type != wnt.typ || string(data) != wnt.data {
			t.Fatalf("kubectl get -w: event %d is %s %s; want %s %s", i+2, e.Type, data, wnt.typ, wnt.data)
		}
		if !rvAfter(e.Object.Metadata.ResourceVersion, prevRV) && e.Type != "DELETED" {
			t.Fatalf("kubectl get -w: resourceVersion %s after %s", e.Object.Metadata.ResourceVersion, prevRV)
		}
		prevRV = e.Object.Metadata.ResourceVersion
	}
	w.Kill()
}

// kubeWatchEvent is one line of kubectl get -w --output-watch-events -o json.
type kubeWatchEvent struct {
	Type   string `json:"type"`
	Object struct {
		Metadata struct {
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	} `json:"object"`
}

func nextKubeEvent(t *testing.T, ch <-chan kubeWatchEvent) kubeWatchEvent {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatalf("kubectl get -w ended early")
		}
		return e
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl get -w: no event in 30s")
	}
	return kubeWatchEvent{}
}

// rvAfter compares resourceVersions as the numbers (etcd revisions) they are.
func rvAfter(a, b string) bool {
	var x, y int64
	fmt.Sscan(a, &x)
	fmt.Sscan(b, &y)
	return x > y
}

func testNamespaceDeletion(t *testing.T, k *kubectl, s *server) {
	k.expect("namespace/qk-ns created", "create", "namespace", "qk-ns")
	for i := 1; i <= 3; i++ {
		k.expect(fmt.Sprintf("configmap/cm-%d created", i), "-n", "qk-ns", "create", "configmap", fmt.Sprintf("cm-%d", i), "--from-literal=k=v")
		k.expect(fmt.Sprintf("secret/s-%d created", i), "-n", "qk-ns", "create", "secret", "generic", fmt.Sprintf("s-%d", i), "--from-literal=k=v")
	}
	if n := storeCount(t, s, "/registry/configmaps/qk-ns/"); n != 3 {
		t.Fatalf("store: %d configmaps under /registry/configmaps/qk-ns/; want 3", n)
	}
	if n := storeCount(t, s, "/registry/secrets/qk-ns/"); n != 3 {
		t.Fatalf("store: %d secrets under /registry/secrets/qk-ns/; want 3", n)
	}

	start := time.Now()
	k.expect(`namespace "qk-ns" deleted`, "delete", "namespace", "qk-ns", "--wait=false")
	if !eventually(context.Background(), 2*time.Minute, time.Second, func() bool { return k.notFound("namespace", "qk-ns") }) {
		t.Fatalf("namespace qk-ns still there 2 minutes after delete:\n%s", k.run("", "get", "namespace", "qk-ns", "-o", "yaml"))
	}
	t.Logf("namespace deletion completed in %v", time.Since(start).Round(time.Millisecond))
	for _, prefix := range []string{"/registry/configmaps/qk-ns/", "/registry/secrets/qk-ns/", "/registry/namespaces/qk-ns"} {
		if n := storeCount(t, s, prefix); n != 0 {
			t.Fatalf("store: %d keys under %s after the namespace is gone; want 0", n, prefix)
		}
	}
}

func testEventExpires(t *testing.T, k *kubectl, s *server, created time.Time) {
	if !eventually(context.Background(), 2*time.Minute, time.Second, func() bool { return k.notFound("event", "qk-event") }) {
		t.Fatalf("event qk-event (--event-ttl=%v) still there %v after its creation", kubeEventTTL, time.Since(created).Round(time.Second))
	}
	t.Logf("event expired %v after its creation (--event-ttl=%v)", time.Since(created).Round(time.Second), kubeEventTTL)
	gone := time.Now()
	if r, err := storeKey(t, s, "/registry/events/default/qk-event"); err != nil || len(r.Kvs) != 0 {
		t.Fatalf("store key /registry/events/default/qk-event after expiry: %v %v; want none", r, err)
	}
	// A list is served from kube-apiserver's watch cache: it learns of the
	// expiry only through the store's DELETE watch event.
	if !eventually(context.Background(), 30*time.Second, time.Second, func() bool {
		return !strings.Contains(k.ok("get", "events", "-o", "name"), "qk-event")
	}) {
		t.Fatalf("kubectl get events (watch cache) still lists qk-event 30s after it expired: the store's lease expiry emitted no DELETE event?")
	}
	t.Logf("the watch cache dropped the event within %v of the direct read", time.Since(gone).Round(time.Second))
}

// testKubeCompaction waits for kube-apiserver's compactor (every
// --etcd-compaction-interval, a CAS on compact_rev_key, then Compact) to have
// compacted the store, and checks the API still serves.
func testKubeCompaction(t *testing.T, k *kubectl, s *server) {
	cli := s.Client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	ok := eventually(ctx, 90*time.Second, time.Second, func() bool {
		_, err = cli.Get(ctx, "/registry/namespaces/default", clientv3.WithRev(2))
		return errors.Is(err, rpctypes.ErrCompacted)
	})
	if !ok {
		t.Fatalf("no compaction by kube-apiserver within 90s (--etcd-compaction-interval=%v): a get at revision 2 says %v", kubeCompactionInterval, err)
	}
	r, err := cli.Get(ctx, "compact_rev_key")
	if err != nil || len(r.Kvs) != 1 || r.Kvs[0].Version < 2 {
		t.Fatalf("compact_rev_key: %+v %v; want the compactor's key at version >= 2", r, err)
	}
	t.Logf("kube-apiserver compacted the store; compact_rev_key at version %d", r.Kvs[0].Version)
	if out := k.ok("get", "namespaces", "-o", "name"); !strings.Contains(out, "namespace/default") {
		t.Fatalf("kubectl get namespaces after compaction: %q", out)
	}
}

// testStoreRestartUnderKube kills the store under a running kube-apiserver,
// restarts it on the same data dir and ports, and checks that the API comes
// back with its data and that resourceVersions did not go backwards.
func testStoreRestartUnderKube(t *testing.T, k *kubectl, s *server, api *kubeAPI) {
	k.expect("configmap/before-kill created", "create", "configmap", "before-kill", "--from-literal=k=v")
	rvBefore := k.listRV("/api/v1/namespaces/default/configmaps")
	s.Kill9()
	killed := time.Now()
	s.Start()
	api.waitReady(t)
	// Writes need the apiserver's etcd client to have reconnected: retry a little.
	var r cmdResult
	if !eventually(context.Background(), 60*time.Second, time.Second, func() bool {
		r = k.run("", "create", "configmap", "after-kill", "--from-literal=k=v")
		return r.Err == nil
	}) {
		t.Fatalf("kubectl create after the store restarted: still failing after 60s:\n%s", r)
	}
	t.Logf("kube-apiserver served a write %v after the store was killed", time.Since(killed).Round(time.Millisecond))
	k.expect("v", "get", "configmap", "before-kill", "-o", "jsonpath={.data.k}")
	rvNow := k.listRV("/api/v1/namespaces/default/configmaps")
	if !rvAfter(rvNow, rvBefore) {
		t.Fatalf("list resourceVersion did not grow across the store restart and a write: %s then %s", rvBefore, rvNow)
	}
	t.Logf("list resourceVersion %s before the kill, %s after", rvBefore, rvNow)
	k.expect(`configmap "after-kill" deleted`, "delete", "configmap", "after-kill")
}

// listRV is the resourceVersion of a list (a consistent read) at path.
func (k *kubectl) listRV(path string) string {
	k.t.Helper()
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	out := k.ok("get", "--raw", path)
	if err := json.Unmarshal([]byte(out), &l); err != nil || l.Metadata.ResourceVersion == "" {
		k.t.Fatalf("list %s: no resourceVersion in %.200q (%v)", path, out, err)
	}
	return l.Metadata.ResourceVersion
}

// badAPIServerLog matches kube-apiserver log lines that point at a store
// that breaks the contract (see docs on the Kubernetes-etcd interface):
// unimplemented RPCs, watch events without prev_kv, cache inconsistencies.
var badAPIServerLog = regexp.MustCompile(`(?i)Unimplemented|inconsisten|prevkv|PrevKv|unknown method|unexpected (event|type)|malformed`)

// testAPIServerLog fails on error lines of kube-apiserver that point at the
// store, and logs how many error lines there were in all.
func testAPIServerLog(t *testing.T, api *kubeAPI) {
	data, err := os.ReadFile(api.logPath)
	if err != nil {
		t.Fatalf("read kube-apiserver log: %v", err)
	}
	var errs, bad []string
	for _, l := range strings.Split(string(data), "\n") {
		if len(l) == 0 || l[0] != 'E' {
			continue
		}
		errs = append(errs, l)
		if badAPIServerLog.MatchString(l) {
			bad = append(bad, l)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("kube-apiserver logged %d errors that point at the store, e.g.:\n%s", len(bad), strings.Join(bad[:min(len(bad), 10)], "\n"))
	}
	t.Logf("kube-apiserver log: %d error lines, none pointing at the store", len(errs))
	for _, l := range errs[:min(len(errs), 5)] {
		t.Logf("  %.300s", l)
	}
}
