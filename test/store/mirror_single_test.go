package storee2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

// TestSingleStoreBackToEtcd is the one-control-plane undo's mechanism
// (docs/adr/005) on a store without peers (mirror.Single): a one-member
// etcd restored with etcdutl from the store's snapshot, the store replaying
// its later revisions onto it under writes, a cut-back, the store a mirror
// of etcd forwarding writes. After it, etcd and the store hold the same
// keys with the same create/mod revisions, versions and leases, etcd's
// revision is the store's, and every acknowledged write is kept.
func TestSingleStoreBackToEtcd(t *testing.T) {
	r := newMirrorRig(t)
	s := r.newServer("store", "qk1")
	s.clusterArgs = nil // no peers: the store runs mirror.Single
	r.Store = []*server{s}
	s.Start()
	sc := s.Client()
	defer sc.Close()
	ctx := context.Background()
	lease, err := sc.Grant(ctx, 3600)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		opts := []clientv3.OpOption{}
		if i%3 == 0 {
			opts = append(opts, clientv3.WithLease(lease.ID))
		}
		if _, err := sc.Put(ctx, fmt.Sprintf("/registry/cm/%04d", i), fmt.Sprint("v", i), opts...); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if _, err := sc.Delete(ctx, fmt.Sprintf("/registry/cm/%04d", i/2)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st := r.status(0); st.Mode != api.Owner {
		t.Fatalf("a fresh single store is in mode %s, want %s", st.Mode, api.Owner)
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	writers := r.storeWriters(wctx, &wg, "single", 20*time.Millisecond)
	e := r.newServer("etcd", "etcd1")
	r.Etcd = []*server{e}
	e.clusterArgs = append(e.clusterArgs, "--initial-cluster", initialCluster(r.Etcd), "--initial-cluster-state", "new")
	start := r.restoreEtcdFromStore("single")
	start()
	time.Sleep(3 * time.Second)
	back, _ := r.transition("cutback", writers)
	time.Sleep(2 * time.Second)
	cancel()
	wg.Wait()
	for _, w := range writers {
		w.report(t)
	}
	if st := r.status(0); st.Mode != api.Mirror {
		t.Fatalf("after the cut-back the store is in mode %s, want %s", st.Mode, api.Mirror)
	}
	level := r.waitLevel(time.Minute)
	n := r.compareAll(level)
	r.compareAll(back.Pause.Revision)
	ec := r.etcdClient()
	defer ec.Close()
	if er, sr := etcdRevOf(t, ec), etcdRevOf(t, sc); er != sr {
		t.Errorf("etcd at revision %d, the store at %d", er, sr)
	}
	kvs, _ := getAll(t, ec, level)
	acked := checkAcked(t, "etcd", kvs, writers...)
	t.Logf("single store back to etcd: cut-back at revision %d, writes held %v; %d keys identical at revision %d; %d acknowledged writes kept",
		back.Pause.Revision, back.Pause.Duration.Round(time.Millisecond), n, level, acked)
}

// TestSingleStoreKubeAPIServerBackToEtcd is the one-control-plane undo's
// data path with a real kube-apiserver v1.36 (compacting every 10 s): it
// writes ConfigMaps on a single store, more while the store replays onto
// the etcd restored from its snapshot, more through the mirror after the
// cut-back; then an API server on etcd (the switch back) lists them with
// the resourceVersions the one on the store returned, and a list at exactly
// the store's last resourceVersion is the same list: no resourceVersion
// changed without a write.
func TestSingleStoreKubeAPIServerBackToEtcd(t *testing.T) {
	bin := kubeAPIServerBin(t)
	r := newMirrorRig(t)
	s := r.newServer("store", "qk1")
	s.clusterArgs = nil
	r.Store = []*server{s}
	s.Start()
	k := startKubeAPIServer(t, bin, s, time.Hour, 10*time.Second)
	kc := &kubectl{t: t, bin: kubectlBin(t), kubeconfig: k.Kubeconfig}
	create := func(prefix string, n int) {
		for i := range n {
			kc.ok("create", "configmap", fmt.Sprintf("%s-%d", prefix, i), "--from-literal=k=v")
		}
	}
	create("before", 20)
	e := r.newServer("etcd", "etcd1")
	r.Etcd = []*server{e}
	e.clusterArgs = append(e.clusterArgs, "--initial-cluster", initialCluster(r.Etcd), "--initial-cluster-state", "new")
	r.restoreEtcdFromStore("kube")()
	create("replayed", 20)
	time.Sleep(2 * time.Second)
	back, _ := r.transition("cutback", nil)
	create("forwarded", 10)
	onStore, storeRV := configMapRVs(kc, "")
	k.proc.Kill()
	k2 := startKubeAPIServer(t, bin, e, time.Hour, 10*time.Second)
	kc2 := &kubectl{t: t, bin: kc.bin, kubeconfig: k2.Kubeconfig}
	exact, _ := configMapRVs(kc2, storeRV)
	for name, rv := range onStore {
		if exact[name] != rv {
			t.Errorf("%s: resourceVersion %s on the store, %q on etcd at exactly %s", name, rv, exact[name], storeRV)
		}
	}
	if len(exact) != len(onStore) {
		t.Errorf("etcd lists %d ConfigMaps at %s, the store listed %d", len(exact), storeRV, len(onStore))
	}
	now, _ := configMapRVs(kc2, "")
	base, _ := strconv.ParseInt(storeRV, 10, 64)
	kept := 0
	for name, rv := range onStore {
		if now[name] == rv {
			kept++
			continue
		}
		if n, _ := strconv.ParseInt(now[name], 10, 64); n <= base {
			t.Errorf("%s: resourceVersion %s on the store, %q on etcd with no write since %s", name, rv, now[name], storeRV)
		}
	}
	t.Logf("cut-back at revision %d (writes held %v); the API server on etcd lists the store's %d ConfigMaps at exactly %s; %d kept their resourceVersion since, %d were written by the new API server",
		back.Pause.Revision, back.Pause.Duration.Round(time.Millisecond), len(exact), storeRV, kept, len(onStore)-kept)
}

// configMapRVs lists every ConfigMap (at exactly rv unless empty) as
// namespace/name → resourceVersion, and the list's resourceVersion.
func configMapRVs(kc *kubectl, rv string) (map[string]string, string) {
	kc.t.Helper()
	path := "/api/v1/configmaps"
	if rv != "" {
		path += "?resourceVersion=" + rv + "&resourceVersionMatch=Exact"
	}
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Items []struct {
			Metadata struct {
				Namespace, Name, ResourceVersion string
			} `json:"metadata"`
		} `json:"items"`
	}
	out := kc.ok("get", "--raw", path)
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		kc.t.Fatalf("list %s: %v in %.200q", path, err, out)
	}
	m := map[string]string{}
	for _, it := range l.Items {
		m[it.Metadata.Namespace+"/"+it.Metadata.Name] = it.Metadata.ResourceVersion
	}
	return m, l.Metadata.ResourceVersion
}
