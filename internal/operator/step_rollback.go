package operator

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/internal/operator/hostrun"
)

// A node that passes its deadline after its runtime step began may have
// host work in flight (a timer about to start the installer, an installer
// halfway). Failing it there would leave whatever that work does next. So
// the Installation turns Failed at once, and the node gets its own undo:
// `quantykube undo runtime` on the host (which first cancels a pending
// install and lets a running one end, see hostrun), then a wait until the
// node is Ready on its old runtime; it stays cordoned, like any failed node,
// until spec.undo. The rollback is bounded by the node's deadline again;
// past it the message says what to run by hand.
//
// Invariant: while Step is rollback or rollback-wait the phase is Failed,
// Degraded is True and Progressing is True; when the rollback ends Step is
// "" and Failed waits for a spec change like any other failure.

// hostWorkMayHaveBegun reports whether a timed-out install step may have
// started host work on the node (its runtime step or later).
func hostWorkMayHaveBegun(in *v1.Installation, t task) bool {
	return opOf(in) == "install" && (t.Step == v1.StepRuntime || t.Step == v1.StepWaitReady)
}

// startRollback records the failure and the rollback step in one write.
func (r *Reconciler) startRollback(ctx context.Context, in *v1.Installation, t task, cause error) error {
	st := &in.Status
	now := metav1.NewTime(r.Now())
	stepsEnded.WithLabelValues(t.Step, opOf(in), "failed").Inc()
	r.deleteStepPods(ctx)
	i := nodeIndex(st, t.Node)
	st.Nodes[i].State, st.Nodes[i].Message = v1.StepRollback, cause.Error()
	st.Phase, st.Step, st.StepStarted, st.Attempt = v1.PhaseFailed, v1.StepRollback, &now, 0
	st.ObservedGeneration = in.Generation
	st.Message = fmt.Sprintf("%s failed: %v; rolling the node back (undo runtime)", stepName(in, t), cause)
	r.setConditions(in, false, true, "NodeTimedOut", st.Message)
	r.event(in, corev1.EventTypeWarning, "StepFailed", st.Message)
	r.Log.Error("node deadline passed; rolling back", "node", t.Node, "step", t.Step, "err", cause)
	return r.writeStatus(ctx, in)
}

// runRollback acts on a rollback step once.
func (r *Reconciler) runRollback(ctx context.Context, in *v1.Installation, t task) (ctrl.Result, error) {
	st := &in.Status
	if st.StepStarted != nil && r.Now().Sub(st.StepStarted.Time) > r.nodeTimeout(in) {
		return ctrl.Result{}, r.finishRollback(ctx, in, t, fmt.Errorf(
			"the rollback did not finish within %v; run `quantykube undo runtime` on %s, then set spec.undo to true or change the spec to retry",
			r.nodeTimeout(in), t.Node))
	}
	var out outcome
	var err error
	if t.Step == v1.StepRollback {
		j := hostJob{Target: hostrun.Target{Subject: "runtime", Op: "undo"}, Node: t.Node, Detach: true, Since: st.StepStarted}
		out, err = r.followHostJob(ctx, in, j)
	} else {
		out, err = r.rollbackWait(ctx, in, t.Node)
	}
	if err != nil {
		r.Log.Warn("rollback pass", "step", t.Step, "node", t.Node, "err", err)
		return ctrl.Result{RequeueAfter: stepPoll}, nil
	}
	switch {
	case out.failed != nil:
		return ctrl.Result{}, r.finishRollback(ctx, in, t, out.failed)
	case out.done && t.Step == v1.StepRollback:
		r.deleteStepPods(ctx)
		now := metav1.NewTime(r.Now())
		st.Step, st.StepStarted, st.Attempt = v1.StepRollbackWait, &now, 0
		st.Message = rollbackLine(in, "undo runtime started")
		return ctrl.Result{RequeueAfter: stepGap}, r.writeStatus(ctx, in)
	case out.done:
		return ctrl.Result{}, r.finishRollback(ctx, in, t, nil)
	}
	st.Message = rollbackLine(in, out.progress)
	r.setConditions(in, false, true, "NodeTimedOut", st.Message)
	return ctrl.Result{RequeueAfter: stepPoll}, r.writeStatus(ctx, in)
}

// rollbackWait is done when the node is Ready on a runtime other than ours.
// The node stays cordoned, as after any failed node step: a person looks
// first, and spec.undo uncordons it (if it was not cordoned before us).
func (r *Reconciler) rollbackWait(ctx context.Context, in *v1.Installation, name string) (outcome, error) {
	n, err := r.getNode(ctx, name)
	if err != nil {
		return outcome{}, err
	}
	rt := n.Status.NodeInfo.ContainerRuntimeVersion
	if !nodeReady(n) || strings.HasPrefix(rt, runtimePrefix) {
		return outcome{progress: fmt.Sprintf("waiting for Ready on the old runtime (now %s, ready=%v)", rt, nodeReady(n))}, nil
	}
	return outcome{done: true, detail: "Ready on " + rt}, nil
}

// finishRollback ends the rollback: the node is Failed with its cause, and
// the message says how the rollback ended (cause nil: it ended well).
func (r *Reconciler) finishRollback(ctx context.Context, in *v1.Installation, t task, rbErr error) error {
	st := &in.Status
	now := metav1.NewTime(r.Now())
	r.deleteStepPods(ctx)
	i := nodeIndex(st, t.Node)
	n := &st.Nodes[i]
	cause := n.Message
	ending := "rolled back; left cordoned (spec.undo uncordons it)"
	if rbErr != nil {
		ending = "rollback failed: " + rbErr.Error()
	} else if node, err := r.getNode(ctx, t.Node); err == nil {
		ending = "rolled back: Ready on " + node.Status.NodeInfo.ContainerRuntimeVersion + ", left cordoned (spec.undo uncordons it)"
	}
	n.State, n.End = string(v1.PhaseFailed), &now
	st.Step, st.StepStarted, st.Attempt = "", nil, 0
	st.Message = fmt.Sprintf("node %s: %s; %s", t.Node, cause, ending)
	what := "set spec.undo to true to move everything back, or fix the cause and change the spec to retry"
	r.setConditions(in, false, false, "NodeTimedOut", st.Message+"; "+what)
	kind := corev1.EventTypeNormal
	if rbErr != nil {
		kind = corev1.EventTypeWarning
	}
	r.event(in, kind, "RolledBack", st.Message)
	return r.writeStatus(ctx, in)
}

func rollbackLine(in *v1.Installation, what string) string {
	st := &in.Status
	return fmt.Sprintf("node %s failed (%s); rolling back: %s: %s", st.Node, st.Nodes[nodeIndex(st, st.Node)].Message, st.Step, what)
}
