package ha

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/quantyroot/quantykube/test/harness"
)

// cluster is the test's environment, set by `scripts/kubeadm.sh ha`.
type cluster struct {
	*harness.Cluster
	lb  string       // the load balancer node
	cps []controlCP  // control planes, by name
	cfg *rest.Config // the kubeconfig's (server: the load balancer)
}

// controlCP is one control-plane node and a client of its own API server.
type controlCP struct {
	name, ip string
	direct   kubernetes.Interface
}

func setup(t *testing.T) *cluster {
	kubeconfig, lb := os.Getenv("QK_HA_KUBECONFIG"), os.Getenv("QK_HA_LB")
	if os.Getenv("QK_HA") != "1" || kubeconfig == "" || lb == "" {
		if os.Getenv("CI") == "true" && os.Getenv("QK_HA_REQUIRED") == "true" {
			t.Fatal("QK_HA=1, QK_HA_KUBECONFIG and QK_HA_LB must be set; run `scripts/kubeadm.sh ha`")
		}
		t.Skip("no HA cluster: run `scripts/kubeadm.sh up --control-planes 3` and `scripts/kubeadm.sh ha`, which sets QK_HA=1 and QK_HA_* for this test")
	}
	c := &cluster{Cluster: harness.Connect(t, kubeconfig, 200), lb: lb}
	var err error
	if c.cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		t.Fatal(err)
	}
	nodes, err := c.CS.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
	if err != nil {
		t.Fatalf("list control-plane nodes: %v", err)
	}
	for _, n := range nodes.Items {
		c.cps = append(c.cps, c.controlPlane(t, &n))
	}
	sort.Slice(c.cps, func(i, j int) bool { return c.cps[i].name < c.cps[j].name })
	if len(c.cps) < 3 {
		if os.Getenv("QK_HA_REQUIRED") == "true" {
			t.Fatalf("%d control planes; this test wants 3 (scripts/kubeadm.sh up --control-planes 3)", len(c.cps))
		}
		t.Skipf("%d control planes; this test wants 3 (scripts/kubeadm.sh up --control-planes 3)", len(c.cps))
	}
	t.Logf("API through %s (%s); control planes %v", lb, c.cfg.Host, names(c.cps))
	return c
}

// controlPlane is node n with a client that talks to its API server only.
func (c *cluster) controlPlane(t *testing.T, n *corev1.Node) controlCP {
	cp := controlCP{name: n.Name}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			cp.ip = a.Address
		}
	}
	if cp.ip == "" {
		t.Fatalf("node %s has no InternalIP", n.Name)
	}
	cfg := rest.CopyConfig(c.cfg)
	cfg.Host = "https://" + cp.ip + ":6443"
	cfg.Timeout = 2 * time.Second
	var err error
	if cp.direct, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return cp
}

func names(cps []controlCP) []string {
	out := make([]string, len(cps))
	for i, cp := range cps {
		out[i] = cp.name
	}
	return out
}
