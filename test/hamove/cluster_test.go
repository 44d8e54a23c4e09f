package hamove

import (
	"context"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/quantyroot/quantykube/test/harness"
)

// cluster is a running 3-control-plane cluster of scripts/kubeadm.sh.
type cluster struct {
	*harness.Cluster
	t     *testing.T
	nodes []string // control-plane node names, the first one first
	addrs []string // their addresses, in the same order
	// direct are clients of each API server (no load balancer here).
	direct []*kubernetes.Clientset
}

func setup(t *testing.T) *cluster {
	kubeconfig, qk, etcdutl := os.Getenv("QK_HAMOVE_KUBECONFIG"), os.Getenv("QK_STORE_BIN"), os.Getenv("QK_ETCDUTL")
	if kubeconfig == "" || qk == "" || etcdutl == "" {
		t.Skip("no cluster: set QK_HAMOVE_KUBECONFIG (a 3-control-plane scripts/kubeadm.sh cluster), QK_STORE_BIN and QK_ETCDUTL")
	}
	c := &cluster{Cluster: harness.Connect(t, kubeconfig, 100), t: t}
	ctx := context.Background()
	nodes, err := c.CS.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 3 {
		t.Skipf("the cluster has %d control-plane nodes, the HA move test wants 3 (QK_CONTROL_PLANES=3 scripts/kubeadm.sh up --workers 0)", len(nodes.Items))
	}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		c.nodes = append(c.nodes, n.Name)
		for _, a := range n.Status.Addresses {
			if a.Type == "InternalIP" {
				c.addrs = append(c.addrs, a.Address)
			}
		}
		c.CopyIn(t, n.Name, qk, "/usr/local/bin/quantykube")
		c.CopyIn(t, n.Name, etcdutl, "/usr/local/bin/etcdutl")
	}
	for _, a := range c.addrs {
		d := rest.CopyConfig(cfg)
		d.Host = "https://" + a + ":6443"
		d.Timeout = 2 * time.Second
		d.QPS, d.Burst = 100, 200
		cs, err := kubernetes.NewForConfig(d)
		if err != nil {
			t.Fatal(err)
		}
		c.direct = append(c.direct, cs)
	}
	return c
}

// remote is hamove.Remote through `scripts/kubeadm.sh exec`.
type remote struct {
	c   *cluster
	env []string // extra environment for the next step (faults)
}

func (r *remote) Step(ctx context.Context, node string, undo bool, step string) (string, error) {
	op := "install"
	if undo {
		op = "undo"
	}
	args := []string{"env"}
	args = append(args, r.env...)
	args = append(args, "quantykube", op, "store", "--ha", step, "--log-level", "info")
	return r.c.Exec(node, args...)
}

func (c *cluster) status(undo bool) string {
	op := "install"
	if undo {
		op = "undo"
	}
	out, _ := c.Exec(c.nodes[0], "quantykube", op, "store", "--ha", "status")
	return strings.TrimSpace(out)
}
