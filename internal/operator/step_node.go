package operator

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/internal/operator/hostrun"
)

// runtimePrefix is how a node on QuantyKube's runtime reports it
// (status.nodeInfo.containerRuntimeVersion "quantykube://0.1.0").
const runtimePrefix = "quantykube://"

// getNode reads the node live (APIReader): the steps decide on it.
func (r *Reconciler) getNode(ctx context.Context, name string) (*corev1.Node, error) {
	var n corev1.Node
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: name}, &n); err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, err)
	}
	return &n, nil
}

// setUnschedulable cordons (v true) or uncordons the node, and reports
// whether it changed it.
func (r *Reconciler) setUnschedulable(ctx context.Context, name string, v bool) (bool, error) {
	n, err := r.getNode(ctx, name)
	if err != nil {
		return false, err
	}
	if n.Spec.Unschedulable == v {
		return false, nil
	}
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Unschedulable = v
	if err := r.Client.Patch(ctx, n, patch); err != nil {
		return false, fmt.Errorf("set node %s unschedulable=%v: %w", name, v, err)
	}
	return true, nil
}

// cordonStep records whether the node was already cordoned (first pass,
// written before the node is touched), then cordons it. begin() keeps the
// record of a node a failed run left cordoned, so its earlier record stands.
// A drain the spec does not allow (drain_plan.go) refuses the node before
// it is cordoned; undoing (no preflight), the step's Event says what the
// drain will do.
func (r *Reconciler) cordonStep(ctx context.Context, in *v1.Installation, name string) (outcome, error) {
	i := nodeIndex(&in.Status, name)
	n, err := r.getNode(ctx, name)
	if err != nil {
		return outcome{failed: fmt.Errorf("%w; remove the label %s from nodes that are gone", err, v1.RuntimeLabel)}, nil
	}
	plan, err := r.planDrain(ctx, in, name)
	if err != nil {
		return outcome{}, err
	}
	if plan.refusal != nil {
		return outcome{failed: plan.refusal}, nil
	}
	ns := &in.Status.Nodes[i]
	if !ns.CordonRecorded {
		// Recorded (and written) before the node is touched.
		ns.WasCordoned, ns.CordonRecorded = n.Spec.Unschedulable, true
		return outcome{progress: fmt.Sprintf("was cordoned before: %v", ns.WasCordoned)}, nil
	}
	if _, err := r.setUnschedulable(ctx, name, true); err != nil {
		return outcome{}, err
	}
	if opOf(in) == v1.OperationUndo {
		return outcome{done: true, detail: plan.impact()}, nil
	}
	return outcome{done: true}, nil // the preflight's Event said it
}

// drainStep evicts the node's pods as kubectl drain does (grace period from
// each pod, eviction retried every 5 s, DaemonSet pods and mirror pods stay,
// emptyDir data deleted only if spec.drain.deleteEmptyDirData allows it),
// bounded to DrainPass per pass.
func (r *Reconciler) drainStep(ctx context.Context, in *v1.Installation, name string) (outcome, error) {
	plan, err := r.planDrain(ctx, in, name)
	if err != nil {
		return outcome{}, err
	}
	if plan.refusal != nil {
		return outcome{failed: plan.refusal}, nil
	}
	pods := plan.pods
	if len(pods) == 0 {
		return outcome{done: true}, nil
	}
	h := r.drainHelper(ctx, in.Spec.Drain.DeleteEmptyDirData)
	err = h.DeleteOrEvictPods(pods)
	left, errs := h.GetPodsForDeletion(name)
	if len(errs) > 0 {
		// Not knowing what is left is not "nothing left": retry the pass.
		return outcome{}, fmt.Errorf("list the pods left on %s after evicting: %s", name, joinErrs(errs))
	}
	n := len(left.Pods())
	if n == 0 {
		return outcome{done: true, detail: fmt.Sprintf("%d pods evicted", len(pods))}, nil
	}
	msg := fmt.Sprintf("draining (%d pods left)", n)
	if blocked := r.blockingBudgets(ctx, left.Pods()); len(blocked) > 0 {
		// The drain helper reports these only as a timeout: name them, and
		// what to do.
		msg += fmt.Sprintf(": blocked by PodDisruptionBudget %s (no disruption allowed); relax it or make room elsewhere, or the node fails at spec.nodeTimeout",
			strings.Join(blocked, ", "))
	} else if err != nil {
		msg += ": " + firstLine(err.Error())
	}
	return outcome{progress: msg}, nil
}

// blockingBudgets names the PodDisruptionBudgets (ns/name) that select one
// of pods and allow no disruption now.
func (r *Reconciler) blockingBudgets(ctx context.Context, pods []corev1.Pod) []string {
	seen := map[string]bool{}
	var out []string
	budgets := map[string][]policyv1.PodDisruptionBudget{}
	for _, p := range pods {
		list, ok := budgets[p.Namespace]
		if !ok {
			l, err := r.Kube.PolicyV1().PodDisruptionBudgets(p.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				r.Log.Warn("list PodDisruptionBudgets", "namespace", p.Namespace, "err", err)
				continue
			}
			list, budgets[p.Namespace] = l.Items, l.Items
		}
		for _, b := range list {
			sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
			if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) || b.Status.DisruptionsAllowed > 0 {
				continue
			}
			if k := b.Namespace + "/" + b.Name; !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

// runtimeStep starts install/undo runtime on the node as a transient unit
// fired by a timer once the host pod has exited (the installer refuses a
// node where pods run, and the old runtime removes every pod anyway). The
// host pod is deleted as soon as it has finished.
func (r *Reconciler) runtimeStep(ctx context.Context, in *v1.Installation, name string) (outcome, error) {
	j := hostJob{Target: hostrun.Target{Subject: v1.SubjectRuntime, Op: opOf(in)}, Node: name, Detach: true, Since: nodeStart(in, name)}
	return r.followHostJob(ctx, in, j)
}

// waitReadyStep waits until the node is Ready on the runtime asked for. A
// node still on its old runtime after CheckGrace is asked through a check
// pod what its host journal says: a rolled-back run fails the step at once
// rather than at the node's deadline.
func (r *Reconciler) waitReadyStep(ctx context.Context, in *v1.Installation, name string) (outcome, error) {
	n, err := r.getNode(ctx, name)
	if err != nil {
		return outcome{}, err
	}
	rt := n.Status.NodeInfo.ContainerRuntimeVersion
	if !nodeReady(n) {
		return outcome{progress: fmt.Sprintf("waiting for Ready (runtime %s)", rt)}, nil
	}
	st := &in.Status
	if onRuntimeAsked(in, rt) {
		// Ready on the runtime asked for: the installer's own last check.
		// (No check pod: the new runtime need not hold our image.)
		return outcome{done: true, detail: "Ready on " + rt + r.restartedPods(ctx, name)}, nil
	}
	if st.StepStarted != nil && r.Now().Sub(st.StepStarted.Time) < r.CheckGrace {
		// The installer has not switched yet (its timer, its preflight): a
		// check pod now would be a pod on the node it refuses to move.
		return outcome{progress: fmt.Sprintf("waiting for the runtime switch (now %s)", rt)}, nil
	}
	if st.JournalCheck == 0 {
		st.JournalCheck = 1 // recorded before the check pod exists
		return outcome{progress: "Ready; checking the host journal"}, nil
	}
	return r.checkJournal(ctx, in, name, rt)
}

// onRuntimeAsked reports whether a node reporting runtime rt runs the one
// the run asks for: QuantyKube's when installing, another when undoing.
func onRuntimeAsked(in *v1.Installation, rt string) bool {
	return strings.HasPrefix(rt, runtimePrefix) == (opOf(in) == v1.OperationInstall)
}

// checkJournal follows the wait-ready step's check pod number
// status.journalCheck, which reads the node's runtime journal; a finished
// one is deleted and the next number recorded.
func (r *Reconciler) checkJournal(ctx context.Context, in *v1.Installation, name, rt string) (outcome, error) {
	st := &in.Status
	j := hostJob{Target: hostrun.Target{Subject: v1.SubjectRuntime, Op: opOf(in)}, Node: name, Check: true, Since: nodeStart(in, name)}
	hs, err := r.ensureHostPod(ctx, in, j, st.JournalCheck)
	if err != nil {
		return outcome{}, err
	}
	if !hs.finished {
		return outcome{progress: fmt.Sprintf("Ready on %s; check pod running", rt)}, nil
	}
	if err := r.deleteHostPod(ctx, j, st.JournalCheck); err != nil {
		return outcome{}, err
	}
	st.JournalCheck++
	if hs.result == nil {
		return outcome{progress: "check pod gave no result: " + hs.reason}, nil
	}
	switch hs.result.State {
	case hostrun.StateRolledBack:
		return outcome{failed: hostPutBack{fmt.Errorf("%s runtime rolled back on %s: %s", j.Target.Op, name, hs.result.Detail)}}, nil
	case hostrun.StateDone:
		if onRuntimeAsked(in, rt) {
			return outcome{done: true, detail: "runtime " + rt}, nil
		}
	}
	return outcome{progress: fmt.Sprintf("Ready on %s; host journal: %s", rt, hs.result.State)}, nil
}

// uncordonStep makes the node schedulable again unless it was cordoned
// before we came.
func (r *Reconciler) uncordonStep(ctx context.Context, in *v1.Installation, name string) (outcome, error) {
	ns := in.Status.Nodes[nodeIndex(&in.Status, name)]
	if ns.WasCordoned {
		return outcome{done: true, detail: "left cordoned as it was before"}, nil
	}
	if _, err := r.setUnschedulable(ctx, name, false); err != nil {
		return outcome{}, err
	}
	return outcome{done: true}, nil
}

// restartedPods describes the step's impact on the node's pods: after a
// drain only static and DaemonSet pods are left, and the runtime switch
// restarted every one of them.
func (r *Reconciler) restartedPods(ctx context.Context, name string) string {
	pods, err := r.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
	if err != nil {
		// The Event goes without the count.
		r.Log.Warn("count the pods restarted on a node", "node", name, "err", err)
		return ""
	}
	n := 0
	for _, p := range pods.Items {
		if p.Labels[LabelManagedBy] != ManagedBy {
			n++
		}
	}
	return fmt.Sprintf("; %d pods restarted on it (static and DaemonSet; the rest were drained)", n)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func joinErrs(errs []error) string {
	s := make([]string, len(errs))
	for i, e := range errs {
		s[i] = e.Error()
	}
	return strings.Join(s, "; ")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// nodeStart is when the node's move (or undo) began.
func nodeStart(in *v1.Installation, name string) *metav1.Time {
	if i := nodeIndex(&in.Status, name); i >= 0 {
		return in.Status.Nodes[i].Start
	}
	return nil
}
