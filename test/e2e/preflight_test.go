package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/test/harness"
)

// A kubelet drop-in that sets the runtime endpoint itself: the node's
// kubelet setup is then not kubeadm's, which install runtime's preflight
// refuses (readKubelet in internal/install/runtimemove). It changes nothing
// the running kubelet does: systemd reads drop-ins at daemon-reload, nothing
// restarts the kubelet while it is there (the install is refused), and it
// names the runtime the kubelet runs on anyway.
const (
	pinnedDropIn     = "/etc/systemd/system/kubelet.service.d/90-qk-e2e-pinned-runtime.conf"
	pinnedDropInText = "[Service]\nEnvironment=\"KUBELET_EXTRA_ARGS=--container-runtime-endpoint=unix:///run/containerd/containerd.sock\"\n"
)

// quietFor is how long a refused node is watched after the refusal: nothing
// may cordon it or evict its pods later either.
const quietFor = 5 * time.Second

// preflightRefusal: from Undone, the worker's host preflight refuses (the
// pinned drop-in). The Installation turns Failed with the host's reason
// seconds after the preflight began (the store moved first), the worker is
// never cordoned and keeps every pod. Then the operator on the worker with
// nowhere to go (the control plane cordoned) is refused the same way. Both
// causes are fixed at the end; the same Installation goes on in the next
// case (nodeCannotFinish), which also checks the drain evicted the operator.
func (c *cluster) preflightRefusal(t *testing.T) {
	if c.node(t, c.worker).Spec.Unschedulable {
		t.Fatalf("%s is cordoned before the case; it must start schedulable", c.worker)
	}
	pods := c.podUIDs(t, c.worker)
	cordons := c.watchCordon(c.worker)
	defer cordons.stop()

	c.MustExec(t, c.worker, "sh", "-c", `printf '%s' "$1" >"$2.tmp" && mv "$2.tmp" "$2"`, "sh", pinnedDropInText, pinnedDropIn)
	unpin := func() { c.MustExec(t, c.worker, "sh", "-c", "rm -f "+pinnedDropIn+" && systemctl daemon-reload") }
	t.Cleanup(unpin)
	c.patchSpec(t, `{"undo":false}`)
	f := c.follow(t, v1.PhaseFailed, 15*time.Minute, false)
	c.refused(t, f, "the host's preflight", pinnedDropIn)
	c.untouched(t, "after the host's refusal", pods, cordons)

	// The operator's own node: it may not drain the node it runs on with
	// nowhere to go. The control plane is cordoned and the operator made to
	// run on the worker.
	unpin()
	c.kubectl(t, "", "cordon", c.cp)
	t.Cleanup(func() { c.kubectl(t, "", "uncordon", c.cp) })
	c.operatorOn(t, c.worker)
	c.patchSpec(t, `{"nodeTimeout":"11m"}`) // a spec change: retry
	f = c.follow(t, v1.PhaseFailed, 5*time.Minute, false)
	c.refused(t, f, "the operator's own node", "the operator runs on "+c.worker)
	c.untouched(t, "after the operator's refusal", pods, cordons)

	// Both causes fixed (the drop-in gone, the control plane schedulable):
	// the next case goes on from this Failed Installation.
	c.kubectl(t, "", "uncordon", c.cp)
}

// refused checks a run that ended Failed at the worker's preflight: the
// node Failed with reason (a part of the message) in its status and in the
// Installation's, the store moved, Degraded True, the worker never recorded
// as cordoned and still on containerd. It logs how long after the
// preflight began the refusal was seen.
func (c *cluster) refused(t *testing.T, f followed, what, reason string) {
	t.Helper()
	st := f.in.Status
	i := nodeIndexOf(st, c.worker)
	if i < 0 {
		t.Fatalf("%s: %s is not in status.nodes %+v", what, c.worker, st.Nodes)
	}
	n := st.Nodes[i]
	// Seen by follow (a quarter second apart), else as the status records
	// it (whole seconds): the node's start is its preflight's.
	if began, ok := f.began[stepKey(v1.PhaseMoving, v1.StepPreflight, c.worker)]; ok {
		t.Logf("figure: %s refused %s %.1fs after its preflight began (status: %s)", what, c.worker, (f.took - began).Seconds(), st.Message)
	} else if n.Start != nil && n.End != nil {
		t.Logf("figure: %s refused %s %.0fs after its preflight began, as the status records it (status: %s)", what, c.worker, n.End.Sub(n.Start.Time).Seconds(), st.Message)
	}
	if n.State != v1.NodeStateFailed || !strings.Contains(n.Message, reason) || !strings.Contains(st.Message, reason) {
		t.Errorf("%s: node status %+v, message %q; want Failed naming %q", what, n, st.Message, reason)
	}
	if n.CordonRecorded {
		t.Errorf("%s: status records a cordon of %s", what, c.worker)
	}
	if st.Store != v1.PhaseMoved || !c.onStore(t) {
		t.Errorf("%s: the store is %q; it moves before any node and stays moved", what, st.Store)
	}
	if d := meta.FindStatusCondition(st.Conditions, v1.ConditionDegraded); d == nil || d.Status != metav1.ConditionTrue {
		t.Errorf("%s: Degraded = %+v; want True", what, d)
	}
	if rt := c.runtimeOf(t, c.worker); rt != "containerd" {
		t.Errorf("%s: %s runs on %q; a refused node stays on containerd", what, c.worker, rt)
	}
}

// untouched checks that the worker was never seen cordoned and still runs
// every pod of before, and that both stay so for quietFor.
func (c *cluster) untouched(t *testing.T, when string, before map[types.UID]string, cordons *cordonWatch) {
	t.Helper()
	if at := cordons.seen(); at != "" {
		t.Errorf("%s: %s was cordoned (seen at %s)", when, c.worker, at)
	}
	harness.Holds(t, when+": "+c.worker+" schedulable, every pod on it kept", quietFor, func(ctx context.Context) error {
		if at := cordons.seen(); at != "" {
			return fmt.Errorf("cordoned (seen at %s)", at)
		}
		now, err := c.podsOn(ctx, c.worker)
		if err != nil {
			return nil // the API server is away: nothing to tell
		}
		var gone []string
		for uid, name := range before {
			if p, ok := now[uid]; !ok || p.DeletionTimestamp != nil {
				gone = append(gone, name)
			}
		}
		if len(gone) > 0 {
			sort.Strings(gone)
			return fmt.Errorf("pods evicted or deleted: %s", strings.Join(gone, ", "))
		}
		return nil
	})
	t.Logf("%s: %s never cordoned, all %d pods it ran kept (same UIDs)", when, c.worker, len(before))
}

// podsOn lists the pods bound to node, by UID.
func (c *cluster) podsOn(ctx context.Context, node string) (map[types.UID]*corev1.Pod, error) {
	pods, err := c.CS.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	out := map[types.UID]*corev1.Pod{}
	for i := range pods.Items {
		out[pods.Items[i].UID] = &pods.Items[i]
	}
	return out, nil
}

// podUIDs is the names of node's pods by UID, none terminating.
func (c *cluster) podUIDs(t *testing.T, node string) map[types.UID]string {
	t.Helper()
	out := map[types.UID]string{}
	harness.Eventually(t, "the pods on "+node+", none terminating", time.Minute, func(ctx context.Context) error {
		pods, err := c.podsOn(ctx, node)
		if err != nil {
			return err
		}
		clear(out)
		for uid, p := range pods {
			if p.DeletionTimestamp != nil {
				return fmt.Errorf("%s/%s is terminating", p.Namespace, p.Name)
			}
			out[uid] = p.Namespace + "/" + p.Name
		}
		return nil
	})
	return out
}

// cordonPoll is how often watchCordon looks. The operator's cordon lasts
// at least through its drain step, a second or more: this sees it.
const cordonPoll = 100 * time.Millisecond

// cordonWatch records whether a node was seen cordoned.
type cordonWatch struct {
	mu     sync.Mutex
	at     string // when first seen cordoned, "" never
	cancel context.CancelFunc
	done   chan struct{}
}

// watchCordon reads node every cordonPoll until stop.
func (c *cluster) watchCordon(node string) *cordonWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &cordonWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		wait.UntilWithContext(ctx, func(ctx context.Context) {
			n, err := c.CS.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil || !n.Spec.Unschedulable {
				return
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.at == "" {
				w.at = time.Now().UTC().Format(time.RFC3339Nano)
			}
		}, cordonPoll)
	}()
	return w
}

func (w *cordonWatch) seen() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at
}

// stop ends the watch (idempotent).
func (w *cordonWatch) stop() {
	w.cancel()
	<-w.done
}

// operatorOn makes the operator run on node: a pod of it elsewhere is
// deleted (the Deployment makes a new one, which the scheduler can only
// place on node), until one runs on node and no other is left.
func (c *cluster) operatorOn(t *testing.T, node string) {
	t.Helper()
	harness.Eventually(t, "the operator running on "+node+" alone", 3*time.Minute, func(ctx context.Context) error {
		pods, err := c.CS.CoreV1().Pods("quantykube-system").List(ctx, metav1.ListOptions{LabelSelector: operatorSelector})
		if err != nil {
			return err
		}
		var on, elsewhere []string
		for _, p := range pods.Items {
			switch {
			case p.Spec.NodeName == node && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning:
				on = append(on, p.Name)
			case p.Spec.NodeName == node && p.DeletionTimestamp == nil:
				return fmt.Errorf("%s is %s on %s", p.Name, p.Status.Phase, node)
			default:
				elsewhere = append(elsewhere, p.Name+" on "+p.Spec.NodeName)
				if p.DeletionTimestamp == nil {
					if err := c.CS.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
						return fmt.Errorf("delete %s: %w", p.Name, err)
					}
				}
			}
		}
		if len(on) != 1 || len(elsewhere) > 0 {
			return fmt.Errorf("on %s: %v; elsewhere: %v", node, on, elsewhere)
		}
		return nil
	})
	t.Logf("the operator runs on %s", node)
}

// operatorNode is the node the (one, not terminating) operator pod runs on.
func (c *cluster) operatorNode(t *testing.T) string {
	t.Helper()
	var on string
	harness.Eventually(t, "one operator pod", time.Minute, func(ctx context.Context) error {
		pods, err := c.CS.CoreV1().Pods("quantykube-system").List(ctx, metav1.ListOptions{LabelSelector: operatorSelector})
		if err != nil {
			return err
		}
		var nodes []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				nodes = append(nodes, p.Spec.NodeName)
			}
		}
		if len(nodes) != 1 {
			return fmt.Errorf("%d operator pods, on %v", len(nodes), nodes)
		}
		on = nodes[0]
		return nil
	})
	return on
}

// nodeIndexOf is the position of name in st.Nodes, or -1.
func nodeIndexOf(st v1.InstallationStatus, name string) int {
	for i := range st.Nodes {
		if st.Nodes[i].Name == name {
			return i
		}
	}
	return -1
}
