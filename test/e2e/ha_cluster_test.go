package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/quantyroot/quantykube/internal/install/storemove"
)

// haCluster is a cluster of three control planes behind a load balancer
// (`scripts/kubeadm.sh up --control-planes 3 --workers 1`). Every client of
// the test (the Prober, the writer, the watchers) talks to the load
// balancer, as a cluster's users do; only the checks of a node's own files
// and units go to the node (`scripts/kubeadm.sh exec`).
type haCluster struct {
	*cluster
	cps []string // the control-plane nodes by name: the operator's order, the first one first
	lb  string   // the load balancer node
}

// haSetup is setup for a three-control-plane cluster; it skips on any
// other (the one-control-plane e2e runs TestOperator instead). The cluster
// may have been made with one control plane behind the load balancer and
// grown to three (`scripts/kubeadm.sh up --lb`, then `grow`), after
// TestOperator ran on it.
func haSetup(t *testing.T) *haCluster {
	c := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := c.CS.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
	if err != nil {
		t.Fatalf("list control-plane nodes: %v", err)
	}
	if len(nodes.Items) != 3 {
		t.Skipf("the cluster has %d control-plane node(s); the HA e2e wants 3 (scripts/kubeadm.sh up --control-planes 3 --workers 1)", len(nodes.Items))
	}
	h := &haCluster{cluster: c, lb: os.Getenv("QK_E2E_LB")}
	if h.lb == "" {
		t.Fatal("QK_E2E_LB is not set: run `scripts/kubeadm.sh e2e`, which names the cluster's load balancer")
	}
	for _, n := range nodes.Items {
		h.cps = append(h.cps, n.Name)
	}
	sort.Strings(h.cps)
	return h
}

// ownClient is a client of the load balancer with its own connection: a
// Dial function makes client-go give the config a transport of its own
// (transports are shared only between configs it can compare), so each
// watcher's and the writer's requests travel on their own HTTP/2
// connection and may land on another API server than the Prober's.
func (h *haCluster) ownClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", h.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dial = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// etcdServersOf is the --etcd-servers of node's kube-apiserver manifest.
func (h *haCluster) etcdServersOf(t *testing.T, node string) string {
	t.Helper()
	out := h.MustExec(t, node, "grep", "-o", "-e", "--etcd-servers=[^ \"]*", "/etc/kubernetes/manifests/kube-apiserver.yaml")
	return strings.TrimSpace(out)
}

// apiServersOn checks that every control plane's API server is configured
// for the store (port 2479) or for etcd (2379), and that the store's member
// unit runs on every node, or on none.
func (h *haCluster) apiServersOn(t *testing.T, when string, store bool) {
	t.Helper()
	port := map[bool]string{true: "127.0.0.1:2479", false: "127.0.0.1:2379"}[store]
	var bad []string
	for _, cp := range h.cps {
		if s := h.etcdServersOf(t, cp); !strings.Contains(s, port) {
			bad = append(bad, fmt.Sprintf("%s's kube-apiserver has %s", cp, s))
		}
		out, _ := h.Exec(cp, "systemctl", "is-active", "quantykube-store")
		if active := strings.TrimSpace(out) == "active"; active != store {
			bad = append(bad, fmt.Sprintf("%s: quantykube-store is %q", cp, strings.TrimSpace(out)))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%s: want every API server on %s and the store's member %s: %s", when, port,
			map[bool]string{true: "running", false: "stopped"}[store], strings.Join(bad, "; "))
		return
	}
	t.Logf("%s: all %d API servers on %s; the store's member %s on each", when, len(h.cps), port,
		map[bool]string{true: "runs", false: "stopped"}[store])
}

// hostLine is the last line of a host step's output (the file the
// operator's host unit writes on the node) that contains what, or "".
func (h *haCluster) hostLine(node, op, step, what string) string {
	out, err := h.Exec(node, "sh", "-c", fmt.Sprintf("grep -F -e %q /var/lib/quantykube/install/store-ha/operator-%s-%s.log | tail -n 1", what, op, step))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// noHostEtcdutl removes any etcdutl a person (or an earlier harness) put at
// hamove's default path on the control planes: the undo must run with the
// one the operator's image carries (hostrun passes it with --etcdutl), as on
// a kubeadm node, where etcd exists only inside its static pod's image.
func (h *haCluster) noHostEtcdutl(t *testing.T) {
	t.Helper()
	for _, cp := range h.cps {
		h.MustExec(t, cp, "rm", "-f", "/usr/local/bin/etcdutl")
	}
}

// setAsideEarlierStoreData moves aside, on each control plane, the store's
// data dir an earlier one-control-plane move left there (its undo keeps
// the data: "the store's data is kept in ..."), as the HA move's preflight
// asks a person to ("the store's data dir ... is not empty; move it aside
// first"): a cluster grown to three control planes after TestOperator (or
// test/move) ran on its first one starts the HA move so. Only the dir of a
// stopped store under an API server on etcd is touched; anything else is
// left for the preflight to refuse.
func (h *haCluster) setAsideEarlierStoreData(t *testing.T) {
	t.Helper()
	dir := storemove.DefaultPaths().DataDir
	for _, cp := range h.cps {
		if out, _ := h.Exec(cp, "sh", "-c", "ls -A "+dir+" 2>/dev/null | head -n 1"); strings.TrimSpace(out) == "" {
			continue
		}
		if out, _ := h.Exec(cp, "systemctl", "is-active", storemove.UnitName); strings.TrimSpace(out) == "active" {
			continue
		}
		if strings.Contains(h.etcdServersOf(t, cp), ":2479") {
			continue
		}
		aside := fmt.Sprintf("%s.before-ha-%d", dir, time.Now().Unix())
		h.MustExec(t, cp, "mv", dir, aside)
		t.Logf("%s: an earlier one-control-plane move left its data in %s (its undo keeps it): moved aside to %s, as the HA move's preflight asks", cp, dir, aside)
	}
}
