package operator

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// startRun begins a run in the spec's direction, or records that the goal
// stands. Bad input is refused here, before anything is touched. A Failed
// installation waits for a spec change; a run that retries it resumes where
// status.failed says (retry.go).
func (r *Reconciler) startRun(ctx context.Context, p *pass) (ctrl.Result, error) {
	in := p.in
	st := &in.Status
	undo := undoing(in)
	if st.Phase == v1.PhaseFailed && specSeen(in) {
		return ctrl.Result{}, nil // waits for spec.retry, spec.undo or another spec change
	}
	_, problem, err := r.validate(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if problem != "" {
		r.refuse(p, v1.ReasonUnsupported, problem)
		return ctrl.Result{}, nil
	}
	if problem := validateSpec(in); problem != "" {
		r.refuse(p, v1.ReasonInvalidSpec, problem)
		return ctrl.Result{}, nil
	}
	if !undo {
		if err := r.refreshNodes(ctx, in); err != nil {
			return ctrl.Result{}, err
		}
	}
	t, ok := firstTask(st, in.Spec.Store, undo)
	t, resumed := resumeAt(st, undo, t)
	observeSpec(in)
	st.Failed = nil
	if !ok {
		finishRun(p, undo) // unchanged (nothing written) when the goal was recorded already
		return ctrl.Result{}, nil
	}
	st.Phase = runPhase(undo)
	r.begin(p, t)
	if resumed && t.Node != "" {
		restartNode(st, t.Node, st.StepStarted)
	}
	r.Log.Info("run started", "phase", st.Phase, "step", t.Step, "node", t.Node, "resumed", resumed, "retry", in.Spec.Retry)
	return ctrl.Result{RequeueAfter: stepGap}, nil
}

// refreshNodes adds every node the selector matches to status.nodes (as
// Pending), in name order after those already there.
func (r *Reconciler) refreshNodes(ctx context.Context, in *v1.Installation) error {
	sel := in.Spec.Runtime.NodeSelector
	if len(sel) == 0 {
		return nil
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(sel)}); err != nil {
		return fmt.Errorf("list nodes matching %v: %w", sel, err)
	}
	names := make([]string, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	for _, name := range names {
		if nodeIndex(&in.Status, name) < 0 {
			in.Status.Nodes = append(in.Status.Nodes, v1.NodeStatus{Name: name, State: v1.NodeStatePending})
		}
	}
	return nil
}

// begin records t as the running step; the pass's status write records it
// before any later pass acts on it.
func (r *Reconciler) begin(p *pass, t task) {
	in := p.in
	st := &in.Status
	now := metav1.NewTime(r.Now())
	clearStep(st)
	st.Step, st.Node, st.StepStarted = t.Step, t.Node, &now
	if t.Node == "" {
		st.Store = st.Phase
	} else if i := nodeIndex(st, t.Node); i >= 0 {
		n := &st.Nodes[i]
		if t.Step == firstNodeStep(undoing(in)) {
			switch n.State {
			case v1.NodeStatePending, v1.NodeStateMoved, v1.NodeStateUndone:
				// A clean start: cordonStep records whether the node was
				// cordoned before us.
				n.WasCordoned, n.CordonRecorded = false, false
			default:
				// Failed or interrupted mid-way: we may have cordoned it
				// ourselves; the earlier record stands.
			}
			n.Start, n.End, n.Message = &now, nil, ""
		}
		n.State = t.Step.NodeState()
	}
	st.Message = progressLine(in, "starting")
	setConditions(in, nil)
	p.event(corev1.EventTypeNormal, eventStepStarted, stepName(in, t))
	stepsStarted.WithLabelValues(string(t.Step), string(opOf(in))).Inc()
}

// clearStep forgets the step's host pods and start: no step is recorded.
func clearStep(st *v1.InstallationStatus) {
	st.Step, st.StepStarted, st.Attempt, st.JournalCheck = "", nil, 0, 0
}

// runStep acts on the recorded step once and records what it found. A node
// past its deadline fails, or is rolled back if host work may have begun.
func (r *Reconciler) runStep(ctx context.Context, p *pass) (ctrl.Result, error) {
	in := p.in
	st := &in.Status
	t := task{Step: st.Step, Node: st.Node}
	if t.Step == v1.StepRollback || t.Step == v1.StepRollbackWait {
		return r.runRollback(ctx, p, t)
	}
	if late := r.pastDeadline(in, t); late != nil {
		back, err := r.rollsBack(ctx, in, t)
		if err != nil {
			return ctrl.Result{}, retry(err)
		}
		if back {
			r.startRollback(ctx, p, t, late)
			return ctrl.Result{RequeueAfter: stepGap}, nil
		}
		r.fail(ctx, p, t, late)
		return ctrl.Result{}, nil
	}
	out, err := r.act(ctx, in, t)
	if err != nil {
		return ctrl.Result{}, retry(err)
	}
	switch {
	case out.failed != nil:
		r.fail(ctx, p, t, out.failed)
		return ctrl.Result{}, nil
	case out.done:
		return r.end(ctx, p, t, out.detail), nil
	}
	st.Message = progressLine(in, out.progress)
	if i := nodeIndex(st, t.Node); i >= 0 {
		st.Nodes[i].Message = out.progress
	}
	setConditions(in, nil)
	return ctrl.Result{RequeueAfter: stepPoll}, nil
}

// act runs one pass of t. An error is transient: nothing is recorded and
// the pass is retried.
func (r *Reconciler) act(ctx context.Context, in *v1.Installation, t task) (outcome, error) {
	switch t.Step {
	case v1.StepStore:
		return r.storeStep(ctx, in)
	case v1.StepPreflight:
		return r.preflightStep(ctx, in, t.Node)
	case v1.StepCordon:
		return r.cordonStep(ctx, in, t.Node)
	case v1.StepDrain:
		return r.drainStep(ctx, in, t.Node)
	case v1.StepRuntime:
		return r.runtimeStep(ctx, in, t.Node)
	case v1.StepWaitReady:
		return r.waitReadyStep(ctx, in, t.Node)
	case v1.StepUncordon:
		return r.uncordonStep(ctx, in, t.Node)
	}
	return outcome{failed: fmt.Errorf("unknown step %q in status; set spec.undo to move back", t.Step)}, nil
}

// end records t as ended well and the next step as begun, in the pass's one
// write.
func (r *Reconciler) end(ctx context.Context, p *pass, t task, detail string) ctrl.Result {
	in := p.in
	st := &in.Status
	undo := st.Phase == v1.PhaseUndoing
	now := metav1.NewTime(r.Now())
	if st.StepStarted != nil {
		stepSeconds.WithLabelValues(string(t.Step), string(opOf(in))).Observe(now.Sub(st.StepStarted.Time).Seconds())
	}
	stepsEnded.WithLabelValues(string(t.Step), string(opOf(in)), "done").Inc()
	r.deleteStepPodsAfter(ctx, t)
	msg := stepName(in, t) + " done"
	if detail != "" {
		msg += ": " + detail
	}
	p.event(corev1.EventTypeNormal, eventStepDone, msg)
	if t.Node == "" {
		st.Store = goalPhase(undo)
	} else if i := nodeIndex(st, t.Node); i >= 0 && t.Step == v1.StepUncordon {
		st.Nodes[i].State, st.Nodes[i].End, st.Nodes[i].Message = goalNodeState(undo), &now, ""
	}
	if undoing(in) != undo {
		// The spec turned around while the step ran: the next pass starts a
		// run in the new direction from here.
		clearStep(st)
		st.Node = ""
		st.Message = fmt.Sprintf("%s; the spec turned around: the run to %s starts next", msg, goalPhase(undoing(in)))
		setConditions(in, nil)
		return ctrl.Result{RequeueAfter: stepGap}
	}
	next, ok := nextTask(st, in.Spec.Store, undo, t)
	if !ok {
		finishRun(p, undo)
		p.event(corev1.EventTypeNormal, string(st.Phase), st.Message)
		return ctrl.Result{}
	}
	r.begin(p, next)
	return ctrl.Result{RequeueAfter: stepGap}
}

// finishRun records the goal reached: phase Moved or Undone, step done.
func finishRun(p *pass, undo bool) {
	st := &p.in.Status
	clearStep(st)
	st.Phase, st.Step, st.Node = goalPhase(undo), v1.StepDone, ""
	st.Message = summary(p.in)
	setConditions(p.in, nil)
}
