package e2e

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/test/harness"
)

// minObjects is what the issue asks the cluster to hold.
const minObjects = 5000

// faultNodeTimeout is spec.nodeTimeout in the fault case: the injected
// failure must turn the Installation Failed before it.
const faultNodeTimeout = 8 * time.Minute

// TestOperator: the user's four commands (label, apply, watch, patch undo)
// on a real cluster, each finished run followed by a pod deleted on the
// worker (the cluster reacts at once); then a node its preflight refuses,
// and a node that cannot finish. The cases build on each other and run in
// order; a failed one stops the rest. How often kube-controller-manager and
// kube-scheduler lost their leader leases across the whole run is reported.
func TestOperator(t *testing.T) {
	c := setup(t)
	want := c.versions(t)
	if len(want) < minObjects {
		t.Fatalf("%d loaded objects; want at least %d (scripts/kubeadm.sh load %d)", len(want), minObjects, minObjects)
	}
	kill := !c.demo
	c.fromScratch(t)
	restarts := harness.LeaderRestarts(t, c.CS, c.cp)
	t.Cleanup(func() { c.leaderRestarts(t, "across the run", restarts) })
	c.kubectl(t, "", "label", "node", c.worker, v1.RuntimeLabel+"="+v1.RuntimeLabelValue, "--overwrite")
	c.applyManifest(t)

	ok := t.Run("move", func(t *testing.T) {
		t0 := time.Now()
		f := c.follow(t, v1.PhaseMoved, 20*time.Minute, kill)
		t.Logf("figure: Moved in %.0fs (store and 1 node%s)", f.took.Seconds(), map[bool]string{true: ", the operator killed at every step"}[kill])
		c.reacts(t, "right after Moved")
		c.printEvents(t, t0)
		c.goalStands(t, f.in, "after the move", want)
	})
	ok = ok && t.Run("undo", func(t *testing.T) {
		t0 := time.Now()
		c.patchSpec(t, `{"undo":true}`)
		f := c.follow(t, v1.PhaseUndone, 20*time.Minute, kill)
		t.Logf("figure: Undone in %.0fs", f.took.Seconds())
		c.reacts(t, "right after Undone")
		c.printEvents(t, t0)
		c.goalStands(t, f.in, "after the undo", want)
	})
	if !ok || c.demo {
		return
	}
	if !t.Run("a node its preflight refuses", func(t *testing.T) { c.preflightRefusal(t) }) {
		return
	}
	t.Run("a node that cannot finish", func(t *testing.T) { c.nodeCannotFinish(t, want) })
}

// goalStands checks what a finished run promises, in its direction (the
// Installation's phase, Moved or Undone): the API server on the store or on
// etcd, the worker on quantykube or containerd, the control plane never
// moved, status, the worker uncordoned, every object kept, every pod
// Running, no installer pod left.
func (c *cluster) goalStands(t *testing.T, in *v1.Installation, when string, want map[string]string) {
	t.Helper()
	goal := in.Status.Phase
	moved := goal == v1.PhaseMoved
	if c.onStore(t) != moved {
		t.Errorf("%s: kube-apiserver on QuantyKube's store = %v; want %v", when, !moved, moved)
	}
	wantRT := map[bool]string{true: "quantykube", false: "containerd"}[moved]
	if rt := c.runtimeOf(t, c.worker); rt != wantRT {
		t.Errorf("%s: %s runs on %q; want %s", when, c.worker, rt, wantRT)
	}
	if rt := c.runtimeOf(t, c.cp); rt != "containerd" {
		t.Errorf("%s: the control plane %s runs on %q; it was not selected and must stay on containerd", when, c.cp, rt)
	}
	wantNode := map[bool]v1.NodeState{true: v1.NodeStateMoved, false: v1.NodeStateUndone}[moved]
	if in.Status.Store != goal || len(in.Status.Nodes) != 1 || in.Status.Nodes[0].State != wantNode {
		t.Errorf("%s: status: store %q, nodes %+v; want %s", when, in.Status.Store, in.Status.Nodes, goal)
	}
	if c.node(t, c.worker).Spec.Unschedulable {
		t.Errorf("%s: %s left cordoned", when, c.worker)
	}
	c.sameVersions(t, when, want)
	c.allPodsRunning(t, when)
	c.noHostPodsLeft(t)
	c.runsTheRelease(t, in, when)
}

// nodeCannotFinish: the Installation the preflight case left Failed goes on
// once its causes are fixed — past the preflight, through the drain (which
// evicts the operator from the worker) — into a node install that fails:
// Failed within the node's deadline, the node rolled back, the rest
// untouched; then spec.undo brings it all back.
func (c *cluster) nodeCannotFinish(t *testing.T, want map[string]string) {
	// The fault is injected on the node the way the installers' tests do
	// (QK_INSTALL_FAIL), through the node's systemd manager: the unit the
	// operator starts there inherits it. The install fails before its
	// commit step and rolls back.
	c.MustExec(t, c.worker, "systemctl", "set-environment", "QK_INSTALL_FAIL=install:switch-kubelet")
	defer c.MustExec(t, c.worker, "systemctl", "unset-environment", "QK_INSTALL_FAIL")
	c.patchSpec(t, `{"undo":false,"nodeTimeout":"`+faultNodeTimeout.String()+`"}`)
	in := c.follow(t, v1.PhaseFailed, 15*time.Minute, false).in
	n := in.Status.Nodes[0]
	if n.State != v1.NodeStateFailed || n.Start == nil || n.End == nil {
		t.Fatalf("node status %+v; want Failed with start and end", n)
	}
	took := n.End.Sub(n.Start.Time)
	t.Logf("figure: %s Failed %.0fs after its move began (deadline %v): %s", c.worker, took.Seconds(), faultNodeTimeout, n.Message)
	if took > faultNodeTimeout {
		t.Errorf("failed after %v, past its deadline %v", took, faultNodeTimeout)
	}
	d := meta.FindStatusCondition(in.Status.Conditions, v1.ConditionDegraded)
	if d == nil || d.Status != metav1.ConditionTrue || !strings.Contains(d.Message, "spec.undo") {
		t.Errorf("Degraded = %+v; want True, saying what to do", d)
	}
	// The node as its own undo left it: back on containerd, Ready.
	if rt := c.runtimeOf(t, c.worker); rt != "containerd" {
		t.Errorf("%s runs on %q after the failure; want containerd", c.worker, rt)
	}
	// The rest untouched: the store stays moved and serving, the control
	// plane stays as it was, no object changed.
	if !c.onStore(t) || in.Status.Store != v1.PhaseMoved {
		t.Errorf("the store was touched by the node's failure (status %q)", in.Status.Store)
	}
	if cp := c.node(t, c.cp); cp.Spec.Unschedulable || !strings.HasPrefix(cp.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") {
		t.Errorf("the control plane was touched: unschedulable=%v runtime %s", cp.Spec.Unschedulable, cp.Status.NodeInfo.ContainerRuntimeVersion)
	}
	c.sameVersions(t, "after the failure", want)
	if on := c.operatorNode(t); on != c.cp {
		t.Errorf("the operator runs on %q after the worker's drain; want %s", on, c.cp)
	}
	c.noHostPodsLeft(t)

	// And back: the fault cleared, spec.undo moves the store back and
	// uncordons the node.
	c.MustExec(t, c.worker, "systemctl", "unset-environment", "QK_INSTALL_FAIL")
	c.patchSpec(t, `{"undo":true}`)
	c.follow(t, v1.PhaseUndone, 15*time.Minute, false)
	if c.onStore(t) || c.node(t, c.worker).Spec.Unschedulable {
		t.Errorf("after the undo: store still in use or %s cordoned", c.worker)
	}
	c.sameVersions(t, "after the undo of the failed run", want)
	c.allPodsRunning(t, "after the undo of the failed run")
}
