package storee2e

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestMirrorKubeAPIServer runs a real kube-apiserver v1.36 on a member of a
// store that mirrors a 3-member etcd: create, get, replace, patch, delete
// and watch work (testKubeCRUD), its writes land in etcd with the
// resourceVersions it returned, its compactions compact both, and at the end
// every key is identical on etcd and the store.
func TestMirrorKubeAPIServer(t *testing.T) {
	bin := kubeAPIServerBin(t)
	r := mirroredRig(t, 100)
	k := startKubeAPIServer(t, bin, r.Store[1], time.Hour, 10*time.Second)
	kc := &kubectl{t: t, bin: kubectlBin(t), kubeconfig: k.Kubeconfig}
	testKubeCRUD(t, kc, r.Store[1])

	kc.expect("configmap/qk-mirror created", "create", "configmap", "qk-mirror", "--from-literal=k=v")
	rv := strings.TrimSpace(kc.ok("get", "configmap", "qk-mirror", "-o", "jsonpath={.metadata.resourceVersion}"))
	ec := r.etcdClient()
	defer ec.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := ec.Get(ctx, "/registry/configmaps/default/qk-mirror")
	if err != nil || len(resp.Kvs) != 1 || strconv.FormatInt(resp.Kvs[0].ModRevision, 10) != rv {
		t.Fatalf("etcd has %v (%v) for the configmap kube-apiserver created on the mirror at resourceVersion %s", resp, err, rv)
	}
	t.Logf("kube-apiserver's write on the mirror is in etcd at its resourceVersion %s", rv)
	checkCompactedBoth(t, ctx, r, ec)
	level := r.waitLevel(time.Minute)
	n := r.compareAll(level)
	t.Logf("%d keys identical on etcd and the store at revision %d", n, level)
}

// checkCompactedBoth waits for kube-apiserver's compactor (two intervals)
// and checks that etcd and the store compacted at the same revision.
func checkCompactedBoth(t *testing.T, ctx context.Context, r *mirrorRig, ec *clientv3.Client) {
	t.Helper()
	var at int64
	if !eventually(ctx, 90*time.Second, time.Second, func() bool {
		resp, err := ec.Get(ctx, "compact_rev_key")
		if err != nil || len(resp.Kvs) == 0 {
			return false
		}
		at, _ = strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
		return at > 0
	}) {
		t.Fatal("kube-apiserver did not compact within 90 s (compact_rev_key)")
	}
	sc := r.Store[0].Client()
	defer sc.Close()
	for name, c := range map[string]*clientv3.Client{"etcd": ec, "store": sc} {
		if !eventually(ctx, 30*time.Second, 200*time.Millisecond, func() bool {
			_, err := c.Get(ctx, "/", clientv3.WithRev(at-1))
			return errors.Is(err, rpctypes.ErrCompacted)
		}) {
			t.Errorf("%s: a read below kube-apiserver's compaction at %d is not refused as compacted", name, at)
		}
		if _, err := c.Get(ctx, "/", clientv3.WithRev(at)); err != nil {
			t.Errorf("%s: a read at the compacted revision %d: %v", name, at, err)
		}
	}
	t.Logf("kube-apiserver compacted etcd and the store at revision %d", at)
}
