package operator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// fail records t as failed: phase Failed, status.failed with where a retry
// resumes, Degraded with what to do. The host installers have already put
// their own work back; a node the failure left as it was before the run is
// uncordoned if we cordoned it (putback.go).
func (r *Reconciler) fail(ctx context.Context, p *pass, t task, cause error) {
	in := p.in
	st := &in.Status
	op := opOf(in) // the failed run's, read before the phase turns Failed
	now := metav1.NewTime(r.Now())
	stepsEnded.WithLabelValues(string(t.Step), string(op), "failed").Inc()
	r.deleteStepPodsAfter(ctx, t)
	putBack, uncordoned := false, false
	if t.Node == "" {
		st.Store = v1.PhaseFailed
	} else if i := nodeIndex(st, t.Node); i >= 0 {
		if leftAsBefore(t.Step, cause) && cordonedByUs(&st.Nodes[i]) {
			putBack = true
			var err error
			if uncordoned, err = r.putNodeBack(ctx, st, i); err != nil {
				// The node stays cordoned; the retry (from its first
				// step) cordons it anyway, and spec.undo uncordons it.
				r.Log.Warn("uncordon after a failed step", "node", t.Node, "step", t.Step, "err", err)
			}
		}
		n := &st.Nodes[i]
		n.State, n.End, n.Message = v1.NodeStateFailed, &now, cause.Error()
	}
	clearStep(st)
	st.Phase = v1.PhaseFailed
	observeSpec(in)
	recordFailed(in, op, t, cause, putBack)
	st.Message = fmt.Sprintf("%s failed: %v", stepName(in, t), cause)
	if uncordoned {
		st.Message += "; uncordoned, as it was before the run"
	}
	setConditions(in, &failure{v1.ReasonStepFailed, st.Message + "; " + whatToDo(in)})
	p.event(corev1.EventTypeWarning, eventStepFailed, st.Message)
	r.Log.Error("step failed", "step", t.Step, "node", t.Node, "retryStep", st.Failed.RetryStep, "err", cause)
}

// whatToDo is what a person does after the failure status.failed records:
// retry it (status.failed.retry says how and from where), or, after a
// failed move, move everything back.
func whatToDo(in *v1.Installation) string {
	f := in.Status.Failed
	if f == nil {
		return "set spec.undo to true to move everything back"
	}
	retry := "fix the cause, then " + f.Retry
	if f.Op == v1.OperationUndo {
		return retry
	}
	return retry + "; or set spec.undo to true to move everything back"
}

// refuse sets Degraded for bad input and touches nothing else. A refusal
// already recorded changes nothing, so it is neither written nor sent again.
func (r *Reconciler) refuse(p *pass, reason, msg string) {
	in := p.in
	in.Status.Message = msg
	if in.Status.Phase == "" {
		in.Status.Phase = v1.PhasePending
	}
	setConditions(in, &failure{reason, msg})
	p.event(corev1.EventTypeWarning, reason, msg)
}
