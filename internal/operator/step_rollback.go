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
	return opOf(in) == v1.OperationInstall && (t.Step == v1.StepRuntime || t.Step == v1.StepWaitReady)
}

// startRollback records the failure and the rollback step, in the pass's
// one write.
func (r *Reconciler) startRollback(ctx context.Context, p *pass, t task, cause error) {
	in := p.in
	st := &in.Status
	now := metav1.NewTime(r.Now())
	stepsEnded.WithLabelValues(string(t.Step), string(opOf(in)), "failed").Inc()
	r.deleteStepPodsAfter(ctx, t)
	i := nodeIndex(st, t.Node)
	st.Nodes[i].State, st.Nodes[i].Message = v1.StepRollback.NodeState(), cause.Error()
	clearStep(st)
	st.Phase, st.Step, st.StepStarted = v1.PhaseFailed, v1.StepRollback, &now
	st.ObservedGeneration = in.Generation
	st.Message = fmt.Sprintf("%s failed: %v; rolling the node back (undo runtime)", stepName(in, t), cause)
	setConditions(in, rollbackFailure(in))
	p.event(corev1.EventTypeWarning, eventStepFailed, st.Message)
	r.Log.Error("node deadline passed; rolling back", "node", t.Node, "step", t.Step, "err", cause)
}

// runRollback acts on a rollback step once. An error is transient (nothing
// recorded, the pass retried).
func (r *Reconciler) runRollback(ctx context.Context, p *pass, t task) (ctrl.Result, error) {
	in := p.in
	st := &in.Status
	if st.StepStarted != nil && r.Now().Sub(st.StepStarted.Time) > r.nodeTimeout(in) {
		r.finishRollback(ctx, p, t, fmt.Errorf(
			"the rollback did not finish within %v; run `quantykube undo runtime` on %s, then set spec.undo to true or change the spec to retry",
			r.nodeTimeout(in), t.Node))
		return ctrl.Result{}, nil
	}
	var out outcome
	var err error
	if t.Step == v1.StepRollback {
		j := hostJob{Target: hostrun.Target{Subject: v1.SubjectRuntime, Op: v1.OperationUndo}, Node: t.Node, Detach: true, Since: st.StepStarted}
		out, err = r.followHostJob(ctx, in, j)
	} else {
		out, err = r.rollbackWait(ctx, t.Node)
	}
	if err != nil {
		return ctrl.Result{}, retry(fmt.Errorf("roll back node %s (%s): %w", t.Node, t.Step, err))
	}
	switch {
	case out.failed != nil:
		r.finishRollback(ctx, p, t, out.failed)
		return ctrl.Result{}, nil
	case out.done && t.Step == v1.StepRollback:
		r.deleteStepPodsAfter(ctx, t)
		now := metav1.NewTime(r.Now())
		clearStep(st)
		st.Step, st.StepStarted = v1.StepRollbackWait, &now
		st.Message = rollbackLine(in, "undo runtime started")
		setConditions(in, rollbackFailure(in))
		return ctrl.Result{RequeueAfter: stepGap}, nil
	case out.done:
		r.finishRollback(ctx, p, t, nil)
		return ctrl.Result{}, nil
	}
	st.Message = rollbackLine(in, out.progress)
	setConditions(in, rollbackFailure(in))
	return ctrl.Result{RequeueAfter: stepPoll}, nil
}

// rollbackWait is done when the node is Ready on a runtime other than ours.
// The node stays cordoned, as after any failed node step: a person looks
// first, and spec.undo uncordons it (if it was not cordoned before us).
func (r *Reconciler) rollbackWait(ctx context.Context, name string) (outcome, error) {
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
// the message says how the rollback ended (rbErr nil: it ended well).
func (r *Reconciler) finishRollback(ctx context.Context, p *pass, t task, rbErr error) {
	in := p.in
	st := &in.Status
	now := metav1.NewTime(r.Now())
	r.deleteStepPodsAfter(ctx, t)
	n := &st.Nodes[nodeIndex(st, t.Node)]
	cause := n.Message
	ending := "rolled back; left cordoned (spec.undo uncordons it)"
	if rbErr != nil {
		ending = "rollback failed: " + rbErr.Error()
	} else if node, err := r.getNode(ctx, t.Node); err != nil {
		// The ending is recorded without the runtime's name.
		r.Log.Warn("read the node's runtime after its rollback", "node", t.Node, "err", err)
	} else {
		ending = "rolled back: Ready on " + node.Status.NodeInfo.ContainerRuntimeVersion + ", left cordoned (spec.undo uncordons it)"
	}
	n.State, n.End = v1.NodeStateFailed, &now
	clearStep(st)
	st.Message = fmt.Sprintf("node %s: %s; %s", t.Node, cause, ending)
	setConditions(in, &failure{v1.ReasonNodeTimedOut, st.Message + "; " + whatToDo(false)})
	kind := corev1.EventTypeNormal
	if rbErr != nil {
		kind = corev1.EventTypeWarning
	}
	p.event(kind, eventRolledBack, st.Message)
}

// rollbackFailure is what Degraded says while a node is rolled back.
func rollbackFailure(in *v1.Installation) *failure {
	st := &in.Status
	cause := st.Nodes[nodeIndex(st, st.Node)].Message
	return &failure{v1.ReasonNodeTimedOut, fmt.Sprintf("node %s: %s; it is rolled back by its own undo (undo runtime), then %s", st.Node, cause, whatToDo(false))}
}

func rollbackLine(in *v1.Installation, what string) string {
	st := &in.Status
	return fmt.Sprintf("node %s failed (%s); rolling back: %s: %s", st.Node, st.Nodes[nodeIndex(st, st.Node)].Message, st.Step, what)
}
