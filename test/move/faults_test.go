package move

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	installSteps = []string{"copy", "verify", "stop-apiserver", "switch-apiserver", "catch-up", "verify-changes", "start-store", "apiserver-ready", "kubeadm-config", "leaders"}
	undoSteps    = []string{"kubeadm-config", "save-etcd", "snapshot-store", "stop-etcd", "restore-etcd", "start-etcd", "replay-to", "cutback", "stop-apiserver", "restore-apiserver", "stop-store", "leaders"}
	// commitStep is each plan's commit step: a run killed at its start or
	// later is finished by the next run, one killed earlier is put back.
	commitStep = map[string]string{"install": "start-store", "undo": "restore-apiserver"}
)

// phase says where step stands in op's plan against its commit step: -1
// before it, 0 the commit step itself, 1 after it.
func phase(op, step string) int {
	steps := installSteps
	if op == "undo" {
		steps = undoSteps
	}
	commit := slices.Index(steps, commitStep[op])
	switch i := slices.Index(steps, step); {
	case i < commit:
		return -1
	case i == commit:
		return 0
	default:
		return 1
	}
}

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

// toEtcd brings the node back on etcd if it is on the store.
func (c *cluster) toEtcd(t *testing.T) {
	t.Helper()
	if c.onStore(t) {
		c.mustNode(t, "quantykube", "undo", "store")
	}
	c.serving(t)
}

// toStore moves the node onto the store if it is on etcd.
func (c *cluster) toStore(t *testing.T) {
	t.Helper()
	if !c.onStore(t) {
		c.mustNode(t, "quantykube", "install", "store")
	}
	c.serving(t)
}

// faultCase is one injected fault: the state it starts from is its own
// business (toEtcd/toStore), so any case runs alone under -run.
type faultCase struct {
	name string
	run  func(t *testing.T)
}

// TestMoveFaults injects a failure into every step of install and undo, and
// kills the command with SIGKILL at the start of every step; after each, the
// next run must complete or roll back, never leave the node half moved, and
// install must never change etcd's data.
//
// A kill before the commit step is put back by the next run, which then
// starts the plan afresh: that rerun carries the same step's injected
// failure ("kill+fail"), so one pair of runs checks both the recovery from
// the kill and the rollback of the failure, and the node stays where it
// was (a separate kill case would move it and need a move back: two
// API-server restarts more for each of those 15 steps).
//
// The other cases are ordered so that each starts where the one before
// ended: every case that ends on the store (an install killed at or after
// its commit step, or failing past it) is followed by one that ends on etcd
// (an undo killed at or after its commit step, or failing past it), and the
// undo cases that stay on the store run while on it. Before a case, a
// kube-controller-manager or kube-scheduler left in restart back-off by the
// cases before is revived (run).
func TestMoveFaults(t *testing.T) {
	c := setup(t)
	c.toEtcd(t)
	defer c.settle(t)
	var endOnStore, endOnEtcd, stayOnStore []faultCase
	for _, step := range installSteps {
		switch phase("install", step) {
		case -1:
			c.run(t, faultCase{"install/kill+fail/" + step, func(t *testing.T) { c.installKilledThenFails(t, step) }})
		case 0:
			c.run(t, faultCase{"install/fail/" + step, func(t *testing.T) { c.installFailsBack(t, step) }})
			endOnStore = append(endOnStore, faultCase{"install/kill/" + step, func(t *testing.T) { c.installKilled(t, step) }})
		default:
			endOnStore = append(endOnStore,
				faultCase{"install/fail/" + step, func(t *testing.T) { c.installFailsForward(t, step) }},
				faultCase{"install/kill/" + step, func(t *testing.T) { c.installKilled(t, step) }})
		}
	}
	for _, step := range undoSteps {
		switch phase("undo", step) {
		case -1:
			stayOnStore = append(stayOnStore, faultCase{"undo/kill+fail/" + step, func(t *testing.T) { c.undoKilledThenFails(t, step) }})
		case 0:
			stayOnStore = append(stayOnStore, faultCase{"undo/fail/" + step, func(t *testing.T) { c.undoFailsBack(t, step) }})
			endOnEtcd = append(endOnEtcd, faultCase{"undo/kill/" + step, func(t *testing.T) { c.undoKilled(t, step) }})
		default:
			endOnEtcd = append(endOnEtcd,
				faultCase{"undo/fail/" + step, func(t *testing.T) { c.undoFailsForward(t, step) }},
				faultCase{"undo/kill/" + step, func(t *testing.T) { c.undoKilled(t, step) }})
		}
	}
	for i, tc := range endOnStore {
		c.run(t, tc)
		if i == 0 {
			for _, tc := range stayOnStore {
				c.run(t, tc)
			}
		}
		if i < len(endOnEtcd) {
			c.run(t, endOnEtcd[i])
		}
	}
	for _, tc := range endOnEtcd[min(len(endOnStore), len(endOnEtcd)):] {
		c.run(t, tc)
	}
	c.toEtcd(t)
}

// installKilledThenFails: an install killed at the start of step (before
// the commit step) is put back by the rerun, whose fresh install then fails
// at the same step and is put back too. The node stays on etcd, the store
// unit stopped, etcd's data unchanged.
func (c *cluster) installKilledThenFails(t *testing.T, step string) {
	c.toEtcd(t)
	_, rev := c.etcdHashKV(t, 0)
	hash, _ := c.etcdHashKV(t, rev)
	if out, err := c.node("env", "QK_INSTALL_KILL=install:"+step+":begin", "quantykube", "install", "store"); err == nil {
		t.Fatalf("install was not killed at %s:\n%s", step, out)
	}
	out, err := c.node("env", "QK_INSTALL_FAIL=install:"+step, "quantykube", "install", "store")
	if err == nil || !strings.Contains(out, "the interrupted install was rolled back") {
		t.Fatalf("the rerun did not put back the install killed at %s: err %v\n%s", step, err, out)
	}
	if !strings.Contains(out, `step "`+step+`" failed`) || !strings.Contains(out, "put back") {
		t.Fatalf("the rerun's install with %s failing: err %v\n%s", step, err, out)
	}
	c.checkOnEtcd(t, rev, hash)
}

// undoKilledThenFails: an undo killed at the start of step (before the
// commit step) is put back by the rerun, whose fresh undo then fails at the
// same step and is put back too. The node stays on the store, etcd as it
// was.
func (c *cluster) undoKilledThenFails(t *testing.T, step string) {
	c.toStore(t)
	hash, rev := c.etcdHashKV(t, 0)
	if out, err := c.node("env", "QK_INSTALL_KILL=undo:"+step+":begin", "quantykube", "undo", "store"); err == nil {
		t.Fatalf("undo was not killed at %s:\n%s", step, out)
	}
	out, err := c.node("env", "QK_INSTALL_FAIL=undo:"+step, "quantykube", "undo", "store")
	if err == nil || !strings.Contains(out, "the interrupted undo was rolled back") || !strings.Contains(out, `step "`+step+`" failed`) {
		t.Fatalf("the rerun did not put back the undo killed at %s, then fail at it: err %v\n%s", step, err, out)
	}
	if !c.onStore(t) {
		t.Fatal("after a failed undo the API server is not back on the store")
	}
	c.serving(t)
	c.etcdAsBefore(t, hash, rev)
}

// etcdAsBefore: etcd, which nothing writes while the API server is on the
// store, answers with the data it had before a rolled-back undo (its
// previous data dir back in place of the restored one).
func (c *cluster) etcdAsBefore(t *testing.T, hash string, rev int64) {
	t.Helper()
	if h, r := c.etcdHashKV(t, 0); h != hash || r != rev {
		t.Fatalf("after a rolled-back undo etcd is at revision %d (hash %s), it was at %d (hash %s): its previous data dir is not back", r, h, rev, hash)
	}
}

// checkOnEtcd: the API server points at etcd and serves, the store unit is
// stopped, and etcd's data at rev still hashes to hash.
func (c *cluster) checkOnEtcd(t *testing.T, rev int64, hash string) {
	t.Helper()
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
}

// installFailsBack: a failure before the commit step is rolled back; the
// node stays on etcd, the store unit stopped, etcd's data unchanged.
func (c *cluster) installFailsBack(t *testing.T, step string) {
	c.toEtcd(t)
	_, rev := c.etcdHashKV(t, 0)
	hash, _ := c.etcdHashKV(t, rev)
	out, err := c.node("env", "QK_INSTALL_FAIL=install:"+step, "quantykube", "install", "store")
	if err == nil || !strings.Contains(out, `step "`+step+`" failed`) || !strings.Contains(out, "put back") {
		t.Fatalf("install with %s failing: err %v\n%s", step, err, out)
	}
	c.checkOnEtcd(t, rev, hash)
}

// installFailsForward: past the commit step the install is finished by a
// rerun, never rolled back. Ends on the store.
func (c *cluster) installFailsForward(t *testing.T, step string) {
	c.toEtcd(t)
	out, err := c.node("env", "QK_INSTALL_FAIL=install:"+step, "quantykube", "install", "store")
	if err == nil || !c.onStore(t) || !strings.Contains(out, "rerun the command to finish") {
		t.Fatalf("install with %s failing after the commit step: err %v\n%s", step, err, out)
	}
	out = c.mustNode(t, "quantykube", "install", "store")
	if !strings.Contains(out, "interrupted install was finished") {
		t.Fatalf("the rerun did not finish the install:\n%s", out)
	}
	c.serving(t)
}

// installKilled: after a SIGKILL at the start of step, a rerun recovers
// (finishes, or rolls back and installs) and etcd's data is unchanged.
// Ends on the store.
func (c *cluster) installKilled(t *testing.T, step string) {
	c.toEtcd(t)
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
}

// undoFailsBack: a failure before undo's commit step (or at it) puts the
// node back on the store, etcd as it was. Ends on the store.
func (c *cluster) undoFailsBack(t *testing.T, step string) {
	c.toStore(t)
	hash, rev := c.etcdHashKV(t, 0)
	out, err := c.node("env", "QK_INSTALL_FAIL=undo:"+step, "quantykube", "undo", "store")
	if err == nil || !strings.Contains(out, `step "`+step+`" failed`) {
		t.Fatalf("undo with %s failing: err %v\n%s", step, err, out)
	}
	if !c.onStore(t) {
		t.Fatal("after a failed undo the API server is not back on the store")
	}
	c.serving(t)
	c.etcdAsBefore(t, hash, rev)
}

// undoFailsForward: past undo's commit step the undo is finished by a
// rerun, never rolled back. Ends on etcd.
func (c *cluster) undoFailsForward(t *testing.T, step string) {
	c.toStore(t)
	out, err := c.node("env", "QK_INSTALL_FAIL=undo:"+step, "quantykube", "undo", "store")
	if err == nil || !strings.Contains(out, `step "`+step+`" failed`) {
		t.Fatalf("undo with %s failing: err %v\n%s", step, err, out)
	}
	if c.onStore(t) || !strings.Contains(out, "rerun the command to finish") {
		t.Fatalf("a failure after the commit step was rolled back:\n%s", out)
	}
	out = c.mustNode(t, "quantykube", "undo", "store")
	if !strings.Contains(out, "interrupted undo was finished") {
		t.Fatalf("the rerun did not finish the undo:\n%s", out)
	}
	c.serving(t)
}

// undoKilled: after a SIGKILL at the start of step, a rerun recovers and
// the node ends on etcd (rolled back and undone, or finished).
func (c *cluster) undoKilled(t *testing.T, step string) {
	c.toStore(t)
	if out, err := c.node("env", "QK_INSTALL_KILL=undo:"+step+":begin", "quantykube", "undo", "store"); err == nil {
		t.Fatalf("undo was not killed at %s:\n%s", step, out)
	}
	out := c.mustNode(t, "quantykube", "undo", "store")
	if !strings.Contains(out, "interrupted undo was") {
		t.Fatalf("the rerun did not recover the interrupted undo:\n%s", out)
	}
	if c.onStore(t) {
		t.Fatalf("after the rerun the API server is still on the store:\n%s", out)
	}
	c.serving(t)
}

// run runs one case after reviving the control plane's leaders if the
// cases before left them in kubelet's restart back-off (see settle): the
// leaders step of a case then waits for them to lead again, as after a
// single move, instead of running out its 60 s on a back-off that only this
// test's dozens of API-server restarts in a row build up.
func (c *cluster) run(t *testing.T, tc faultCase) {
	t.Helper()
	if !c.leadersReady(t) {
		c.settle(t)
	}
	t.Run(tc.name, tc.run)
}

// leadersReady reports whether kube-controller-manager and kube-scheduler
// are both Ready.
func (c *cluster) leadersReady(t *testing.T) bool {
	t.Helper()
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		if !c.podReady(name + "-" + c.nodeName(t)) {
			return false
		}
	}
	return true
}

// podReady reports whether the kube-system pod is Ready.
func (c *cluster) podReady(pod string) bool {
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
		waitFor(t, pod+" Ready", 3*time.Minute, func() bool { return c.podReady(pod) })
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
