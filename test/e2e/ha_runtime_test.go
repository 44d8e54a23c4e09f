package e2e

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// EnvHARuntimeNodes names control-plane nodes (comma-separated) that
// TestOperatorHA also selects for the runtime: the operator then moves
// their runtime after the store's HA move, and back before its undo, one
// node at a time. Off by default (each node adds a move and an undo to the
// CI stage); `QK_E2E_HA_RUNTIME=qk-cp2,qk-cp3 scripts/kubeadm.sh e2e`.
const EnvHARuntimeNodes = "QK_E2E_HA_RUNTIME"

// haRuntimeNodes are the nodes EnvHARuntimeNodes names, checked to be
// control planes of the cluster.
func (h *haCluster) haRuntimeNodes(t *testing.T) []string {
	t.Helper()
	v := os.Getenv(EnvHARuntimeNodes)
	if v == "" {
		return nil
	}
	var out []string
	for _, n := range strings.Split(v, ",") {
		found := false
		for _, cp := range h.cps {
			found = found || cp == n
		}
		if !found {
			t.Fatalf("%s=%s: %s is not a control plane of the cluster (%v)", EnvHARuntimeNodes, v, n, h.cps)
		}
		out = append(out, n)
	}
	return out
}

// cpCordonWatch records the most control-plane nodes cordoned at once while
// it runs: the operator moves one node at a time, so a quorum of control
// planes (etcd's or the store's members, and API servers) always runs.
type cpCordonWatch struct {
	mu   sync.Mutex
	most int
	at   []string
	stop func()
}

func (h *haCluster) watchCordons(t *testing.T) *cpCordonWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &cpCordonWatch{}
	done := make(chan struct{})
	w.stop = func() { cancel(); <-done }
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cctx, c := context.WithTimeout(ctx, 5*time.Second)
			nodes, err := h.CS.CoreV1().Nodes().List(cctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
			c()
			if err == nil {
				var cordoned []string
				for _, n := range nodes.Items {
					if n.Spec.Unschedulable {
						cordoned = append(cordoned, n.Name)
					}
				}
				w.mu.Lock()
				if len(cordoned) > w.most {
					w.most, w.at = len(cordoned), cordoned
				}
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

// checkRuntimes checks that each of nodes runs on want and the status
// records it in state.
func (h *haCluster) checkRuntimes(t *testing.T, in *v1.Installation, nodes []string, want string, state v1.NodeState) {
	t.Helper()
	for _, n := range nodes {
		if rt := h.runtimeOf(t, n); rt != want {
			t.Errorf("%s runs on %q; want %s", n, rt, want)
		}
		var got v1.NodeState
		for _, ns := range in.Status.Nodes {
			if ns.Name == n {
				got = ns.State
			}
		}
		if got != state {
			t.Errorf("status.nodes[%s]: %q; want %q", n, got, state)
		}
	}
}
