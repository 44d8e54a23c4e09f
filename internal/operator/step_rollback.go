package operator

import (
	"context"
	"fmt"
	"strings"
	"time"

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
// node is Ready on its old runtime; then it is left as it was before the
// move: uncordoned if we cordoned it, cordoned if it was before
// (putback.go). The rollback is bounded by the node's deadline again; past
// it the message says what to run by hand, and the node stays cordoned.
//
// The store step of one control plane past spec.storeTimeout is rolled back
// the same way (deadline.go): `quantykube undo store` on the control-plane
// node (which first lets a running install end, see hostrun), followed to
// its end, bounded by spec.storeTimeout again. There is no rollback-wait:
// undo store ends once the controllers lead again through etcd.
//
// Invariant: while Step is rollback or rollback-wait the phase is Failed,
// Degraded is True and Progressing is True, and status.failed records the
// step that failed and why; when the rollback ends Step is "" and Failed
// waits for a spec change (spec.retry) like any other failure.

// startRollback records the failure and the rollback step, in the pass's
// one write.
func (r *Reconciler) startRollback(ctx context.Context, p *pass, t task, cause error) {
	in := p.in
	st := &in.Status
	op := opOf(in) // the failed run's, read before the phase turns Failed
	name := stepName(in, t)
	now := metav1.NewTime(r.Now())
	stepsEnded.WithLabelValues(string(t.Step), string(op), "failed").Inc()
	r.deleteStepPodsAfter(ctx, t)
	putBack := false
	if t.Node == "" {
		st.Store = v1.PhaseFailed
	} else {
		i := nodeIndex(st, t.Node)
		st.Nodes[i].State, st.Nodes[i].Message = v1.StepRollback.NodeState(), cause.Error()
		// What a retry does once the rollback has ended well
		// (finishRollback records what it does after all).
		putBack = cordonedByUs(&st.Nodes[i])
	}
	clearStep(st)
	st.Phase, st.Step, st.StepStarted = v1.PhaseFailed, v1.StepRollback, &now
	observeSpec(in)
	recordFailed(in, op, t, cause, putBack)
	st.Message = fmt.Sprintf("%s failed: %v; rolling %s back (%s)", name, cause, rollbackSubject(t), rollbackCommand(t))
	setConditions(in, rollbackFailure(in))
	p.event(corev1.EventTypeWarning, eventStepFailed, st.Message)
	r.Log.Error("deadline passed; rolling back", "node", t.Node, "step", t.Step, "err", cause)
}

// runRollback acts on a rollback step once. An error is transient (nothing
// recorded, the pass retried).
func (r *Reconciler) runRollback(ctx context.Context, p *pass, t task) (ctrl.Result, error) {
	in := p.in
	st := &in.Status
	if limit := r.rollbackLimit(in, t); st.StepStarted != nil && r.Now().Sub(st.StepStarted.Time) > limit {
		where := t.Node
		if where == "" {
			where = "the control-plane node"
		}
		r.finishRollback(ctx, p, t, false, fmt.Errorf(
			"the rollback did not finish within %v; run `quantykube %s` on %s, then set spec.undo to true or raise spec.retry to retry",
			limit, rollbackCommand(t), where))
		return ctrl.Result{}, nil
	}
	out, err := r.rollbackStep(ctx, in, t)
	if err != nil {
		return ctrl.Result{}, retry(fmt.Errorf("roll back %s (%s): %w", rollbackSubject(t), t.Step, err))
	}
	switch {
	case out.failed != nil:
		r.finishRollback(ctx, p, t, false, out.failed)
		return ctrl.Result{}, nil
	case out.done && t.Step == v1.StepRollback && t.Node != "":
		r.deleteStepPodsAfter(ctx, t)
		now := metav1.NewTime(r.Now())
		clearStep(st)
		st.Step, st.StepStarted = v1.StepRollbackWait, &now
		st.Message = rollbackLine(in, "undo runtime started")
		setConditions(in, rollbackFailure(in))
		return ctrl.Result{RequeueAfter: stepGap}, nil
	case out.done && t.Node == "":
		r.finishRollback(ctx, p, t, false, nil)
		return ctrl.Result{}, nil
	case out.done:
		i := nodeIndex(st, t.Node)
		if _, err := r.putNodeBack(ctx, st, i); err != nil {
			return ctrl.Result{}, retry(fmt.Errorf("put node %s back after its rollback: %w", t.Node, err))
		}
		r.finishRollback(ctx, p, t, cordonedByUs(&st.Nodes[i]), nil)
		return ctrl.Result{}, nil
	}
	st.Message = rollbackLine(in, out.progress)
	setConditions(in, rollbackFailure(in))
	return ctrl.Result{RequeueAfter: stepPoll}, nil
}

// rollbackStep runs one pass of the rollback's host work or wait. An error
// is transient.
func (r *Reconciler) rollbackStep(ctx context.Context, in *v1.Installation, t task) (outcome, error) {
	st := &in.Status
	switch {
	case t.Node == "":
		cps, err := r.controlPlanes(ctx)
		if err != nil {
			return outcome{}, err
		}
		if len(cps) != 1 {
			return outcome{failed: fmt.Errorf("%d control-plane nodes now (%s); undo store runs on the one control plane the move began on", len(cps), strings.Join(cps, ", "))}, nil
		}
		j := hostJob{Target: hostrun.Target{Subject: v1.SubjectStore, Op: v1.OperationUndo}, Node: cps[0], Since: st.StepStarted}
		return r.followHostJob(ctx, in, j)
	case t.Step == v1.StepRollback:
		j := hostJob{Target: hostrun.Target{Subject: v1.SubjectRuntime, Op: v1.OperationUndo}, Node: t.Node, Detach: true, Since: st.StepStarted}
		return r.followHostJob(ctx, in, j)
	}
	return r.rollbackWait(ctx, t.Node)
}

// rollbackWait is done when the node is Ready on a runtime other than ours.
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

// finishRollback ends the rollback: the node (or the store) is Failed with
// its cause, and the message says how the rollback ended (rbErr nil: it
// ended well) and whether the node was uncordoned (it was, if we had
// cordoned it).
func (r *Reconciler) finishRollback(ctx context.Context, p *pass, t task, uncordoned bool, rbErr error) {
	in := p.in
	st := &in.Status
	now := metav1.NewTime(r.Now())
	r.deleteStepPodsAfter(ctx, t)
	ending := "rolled back (undo store)"
	if rbErr != nil {
		ending = "rollback failed: " + rbErr.Error()
	}
	if t.Node != "" {
		ending = r.nodeRollbackEnding(ctx, t.Node, uncordoned, rbErr)
		n := &st.Nodes[nodeIndex(st, t.Node)]
		n.State, n.End = v1.NodeStateFailed, &now
	}
	setRetryStep(in, uncordoned)
	clearStep(st)
	st.Message = fmt.Sprintf("%s: %s; %s", rollbackWho(t), st.Failed.Cause, ending)
	setConditions(in, &failure{timedOutReason(t), st.Message + "; " + whatToDo(in)})
	kind := corev1.EventTypeNormal
	if rbErr != nil {
		kind = corev1.EventTypeWarning
	}
	p.event(kind, eventRolledBack, st.Message)
}

// nodeRollbackEnding says how a node's rollback ended.
func (r *Reconciler) nodeRollbackEnding(ctx context.Context, name string, uncordoned bool, rbErr error) string {
	if rbErr != nil {
		return "rollback failed: " + rbErr.Error() + "; left cordoned"
	}
	cordon := "left cordoned, as it was before the move"
	if uncordoned {
		cordon = "uncordoned, as it was before the move"
	}
	node, err := r.getNode(ctx, name)
	if err != nil {
		// The ending is recorded without the runtime's name.
		r.Log.Warn("read the node's runtime after its rollback", "node", name, "err", err)
		return "rolled back; " + cordon
	}
	return "rolled back: Ready on " + node.Status.NodeInfo.ContainerRuntimeVersion + ", " + cordon
}

// rollbackFailure is what Degraded says while a node or the store is
// rolled back.
func rollbackFailure(in *v1.Installation) *failure {
	st := &in.Status
	t := task{Step: st.Failed.Step, Node: st.Failed.Node}
	return &failure{timedOutReason(t), fmt.Sprintf("%s: %s; it is rolled back by its own undo (%s), then %s", rollbackWho(t), st.Failed.Cause, rollbackCommand(t), whatToDo(in))}
}

func rollbackLine(in *v1.Installation, what string) string {
	st := &in.Status
	t := task{Step: st.Failed.Step, Node: st.Failed.Node}
	return fmt.Sprintf("%s failed (%s); rolling back: %s: %s", rollbackWho(t), st.Failed.Cause, st.Step, what)
}

// rollbackLimit bounds a rollback: the subject's own deadline again.
func (r *Reconciler) rollbackLimit(in *v1.Installation, t task) time.Duration {
	if t.Node == "" {
		return r.storeTimeout(in)
	}
	return r.nodeTimeout(in)
}

// timedOutReason is Degraded's reason for a step rolled back at its
// deadline.
func timedOutReason(t task) string {
	if t.Node == "" {
		return v1.ReasonStoreTimedOut
	}
	return v1.ReasonNodeTimedOut
}

// rollbackCommand is the host command that rolls t's subject back.
func rollbackCommand(t task) string {
	if t.Node == "" {
		return "undo store"
	}
	return "undo runtime"
}

// rollbackWho names t's subject at the start of a line: "node w1", "the
// store".
func rollbackWho(t task) string {
	if t.Node == "" {
		return "the store"
	}
	return "node " + t.Node
}

// rollbackSubject names t's subject inside a line.
func rollbackSubject(t task) string {
	if t.Node == "" {
		return "the store"
	}
	return "the node"
}
