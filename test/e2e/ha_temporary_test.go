package e2e

import (
	"os"
	"testing"
)

// TEMPORARY (issue #14): the HA undo's replay-to and restore-etcd run
// etcd's etcdutl at /usr/local/bin/etcdutl on each control-plane node
// (hamove's --etcdutl default), and neither kubeadm nor the operator puts
// one there: a kubeadm node has etcd only inside its static pod's image.
// Until the operator ships etcdutl to the nodes (or the host steps do
// without it), the test installs the harness's etcdutl (etcd 3.6.16, the
// cluster's version) on every control plane before the move, as test/hamove
// does; without it the undo stops Failed at replay-to ("etcdutl not found").
// Remove this file and its one call in TestOperatorHA when that lands.
func (h *haCluster) temporaryInstallEtcdutl(t *testing.T) {
	t.Helper()
	src := os.Getenv("QK_E2E_ETCDUTL")
	if src == "" {
		t.Fatal("QK_E2E_ETCDUTL is not set: run `scripts/kubeadm.sh e2e`, which names the harness's etcdutl")
	}
	for _, cp := range h.cps {
		h.CopyIn(t, cp, src, "/usr/local/bin/etcdutl")
	}
	t.Logf("TEMPORARY: etcdutl installed at /usr/local/bin/etcdutl on %v (the operator does not put it there yet)", h.cps)
}
