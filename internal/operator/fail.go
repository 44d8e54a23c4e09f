package operator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// fail records t as failed: phase Failed, Degraded with what to do. The host
// installers have already put their own work back; a node cordoned by us
// before its runtime step started is uncordoned.
func (r *Reconciler) fail(ctx context.Context, p *pass, t task, cause error) {
	in := p.in
	st := &in.Status
	now := metav1.NewTime(r.Now())
	stepsEnded.WithLabelValues(string(t.Step), string(opOf(in)), "failed").Inc()
	r.deleteStepPodsAfter(ctx, t)
	what := whatToDo(st.Phase == v1.PhaseUndoing)
	if t.Node == "" {
		st.Store = v1.PhaseFailed
	} else if i := nodeIndex(st, t.Node); i >= 0 {
		n := &st.Nodes[i]
		if (t.Step == v1.StepCordon || t.Step == v1.StepDrain) && n.CordonRecorded && !n.WasCordoned {
			if err := r.setUnschedulable(ctx, t.Node, false); err != nil {
				// The node stays cordoned; spec.undo uncordons it.
				r.Log.Warn("uncordon after a failed step", "node", t.Node, "step", t.Step, "err", err)
			}
		}
		n.State, n.End, n.Message = v1.NodeStateFailed, &now, cause.Error()
	}
	clearStep(st)
	st.Phase = v1.PhaseFailed
	st.ObservedGeneration = in.Generation
	st.Message = fmt.Sprintf("%s failed: %v", stepName(in, t), cause)
	setConditions(in, &failure{v1.ReasonStepFailed, st.Message + "; " + what})
	p.event(corev1.EventTypeWarning, eventStepFailed, st.Message)
	r.Log.Error("step failed", "step", t.Step, "node", t.Node, "err", cause)
}

// whatToDo is what a person does after a failed run (undoingRun: the run
// that failed was an undo).
func whatToDo(undoingRun bool) string {
	if undoingRun {
		return "fix the cause and change the spec (e.g. set spec.undo false, then true) to retry"
	}
	return "set spec.undo to true to move everything back, or fix the cause and change the spec to retry"
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
