package move

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	installSteps = []string{"copy", "verify", "stop-apiserver", "switch-apiserver", "catch-up", "verify-changes", "start-store", "apiserver-ready", "kubeadm-config"}
	undoSteps    = []string{"kubeadm-config", "save-etcd", "copy-back", "stop-apiserver", "catch-up", "restore-apiserver", "stop-store"}
	// afterCommit are the steps that follow a plan's commit step, by plan.
	afterCommit = map[string]bool{"install:apiserver-ready": true, "install:kubeadm-config": true, "undo:stop-store": true}
)

// onStore reports where the API server's manifest points.
func (c *cluster) onStore(t *testing.T) bool {
	return strings.Contains(manifestEtcdServers(t, c), "127.0.0.1:2479")
}

// serving checks the API server answers a list within a minute.
func (c *cluster) serving(t *testing.T) {
	t.Helper()
	waitFor(t, "the API server to serve", 2*time.Minute, func() bool {
		_, err := c.cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{Limit: 1})
		return err == nil
	})
}

// TestMoveFaults injects a failure into every step of install and undo, and
// kills the command with SIGKILL at the start of every step; after each, the
// next run must complete or roll back, never leave the node half moved, and
// install must never change etcd's data.
func TestMoveFaults(t *testing.T) {
	c := setup(t)
	if c.onStore(t) {
		c.mustNode(t, "quantykube", "undo", "store")
	}
	c.serving(t)
	defer c.settle(t)
	for _, step := range installSteps {
		t.Run("install/fail/"+step, func(t *testing.T) {
			_, rev := c.etcdHashKV(t, 0)
			hash, _ := c.etcdHashKV(t, rev)
			out, err := c.node("env", "QK_INSTALL_FAIL=install:"+step, "quantykube", "install", "store")
			if afterCommit["install:"+step] {
				// Past the commit step the install is finished by a rerun, never rolled back.
				if err == nil || !c.onStore(t) || !strings.Contains(out, "rerun the command to finish") {
					t.Fatalf("install with %s failing after the commit step: err %v\n%s", step, err, out)
				}
				out = c.mustNode(t, "quantykube", "install", "store")
				if !strings.Contains(out, "interrupted install was finished") {
					t.Fatalf("the rerun did not finish the install:\n%s", out)
				}
				c.serving(t)
				c.mustNode(t, "quantykube", "undo", "store")
				c.serving(t)
				return
			}
			if err == nil || !strings.Contains(out, `step "`+step+`" failed`) || !strings.Contains(out, "put back") {
				t.Fatalf("install with %s failing: err %v\n%s", step, err, out)
			}
			if c.onStore(t) {
				t.Fatal("after a failed install the API server points at the store")
			}
			c.serving(t)
			if out, err := c.node("systemctl", "is-active", "quantykube-store"); err == nil {
				t.Fatalf("the store unit is still active after a failed install: %s", out)
			}
			if h, _ := c.etcdHashKV(t, rev); h != hash {
				t.Fatalf("a failed install changed etcd's data at revision %d", rev)
			}
		})
		t.Run("install/kill/"+step, func(t *testing.T) {
			_, rev := c.etcdHashKV(t, 0)
			hash, _ := c.etcdHashKV(t, rev)
			if out, err := c.node("env", "QK_INSTALL_KILL=install:"+step+":begin", "quantykube", "install", "store"); err == nil {
				t.Fatalf("install was not killed at %s:\n%s", step, out)
			}
			out := c.mustNode(t, "quantykube", "install", "store")
			if !strings.Contains(out, "interrupted install was") {
				t.Fatalf("the rerun did not recover the interrupted install:\n%s", out)
			}
			if !c.onStore(t) {
				t.Fatalf("after the rerun the API server is not on the store:\n%s", out)
			}
			c.serving(t)
			if h, _ := c.etcdHashKV(t, rev); h != hash {
				t.Fatalf("install changed etcd's data at revision %d", rev)
			}
			c.mustNode(t, "quantykube", "undo", "store")
			c.serving(t)
		})
	}
	for _, step := range undoSteps {
		t.Run("undo/fail/"+step, func(t *testing.T) {
			c.mustNode(t, "quantykube", "install", "store")
			c.serving(t)
			out, err := c.node("env", "QK_INSTALL_FAIL=undo:"+step, "quantykube", "undo", "store")
			if err == nil || !strings.Contains(out, `step "`+step+`" failed`) {
				t.Fatalf("undo with %s failing: err %v\n%s", step, err, out)
			}
			if afterCommit["undo:"+step] {
				// Past the commit step the undo is finished by a rerun, never rolled back.
				if c.onStore(t) || !strings.Contains(out, "rerun the command to finish") {
					t.Fatalf("a failure after the commit step was rolled back:\n%s", out)
				}
				out = c.mustNode(t, "quantykube", "undo", "store")
				if !strings.Contains(out, "interrupted undo was finished") {
					t.Fatalf("the rerun did not finish the undo:\n%s", out)
				}
				c.serving(t)
				return
			}
			if !c.onStore(t) {
				t.Fatal("after a failed undo the API server is not back on the store")
			}
			c.serving(t)
			c.mustNode(t, "quantykube", "undo", "store")
			c.serving(t)
		})
		t.Run("undo/kill/"+step, func(t *testing.T) {
			c.mustNode(t, "quantykube", "install", "store")
			c.serving(t)
			if out, err := c.node("env", "QK_INSTALL_KILL=undo:"+step+":begin", "quantykube", "undo", "store"); err == nil {
				t.Fatalf("undo was not killed at %s:\n%s", step, out)
			}
			out := c.mustNode(t, "quantykube", "undo", "store")
			if !strings.Contains(out, "interrupted undo was") {
				t.Fatalf("the rerun did not recover the interrupted undo:\n%s", out)
			}
			if c.onStore(t) {
				// rolled back: the rerun then undid it for real, or said nothing to do
				t.Fatalf("after the rerun the API server is still on the store:\n%s", out)
			}
			c.serving(t)
		})
	}
}

// settle undoes what many API-server restarts in a row do to the control
// plane's other static pods: kube-controller-manager and kube-scheduler lose
// leader election at every restart, exit, and kubelet's crash-loop back-off
// grows to 5 minutes. A kubelet restart resets the back-off (pods keep
// running); then both must be Ready again, so later tests find a whole
// control plane.
func (c *cluster) settle(t *testing.T) {
	t.Helper()
	c.mustNode(t, "systemctl", "restart", "kubelet")
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		pod := name + "-" + c.nodeName(t)
		waitFor(t, pod+" Ready", 3*time.Minute, func() bool {
			p, err := c.cs.CoreV1().Pods("kube-system").Get(context.Background(), pod, metav1.GetOptions{})
			if err != nil {
				return false
			}
			for _, cd := range p.Status.Conditions {
				if cd.Type == "Ready" {
					return cd.Status == "True"
				}
			}
			return false
		})
	}
}

// nodeName is the control-plane node's name in the API.
func (c *cluster) nodeName(t *testing.T) string {
	t.Helper()
	nodes, err := c.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("no control-plane node: %v", err)
	}
	return nodes.Items[0].Name
}
