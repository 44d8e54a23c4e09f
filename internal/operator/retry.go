package operator

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// A Failed installation waits for its spec to change (ADR 203). Then
// startRun starts a run in the spec's direction:
//   - the failed run's direction (spec.retry raised, or another spec
//     change, as before spec.retry existed): it resumes at
//     status.failed.retryStep on the failed run's node, or the store; the
//     store and the nodes already done are not done again;
//   - the other direction (spec.undo changed): from its beginning.
//
// Invariants:
//   - A failure is recorded (status.failed, with observedGeneration and
//     observedRetry) in the same write as the Failed phase: a restarted
//     operator knows where a retry resumes and which spec.retry it has
//     already seen.
//   - The write that starts the next run records observedRetry =
//     spec.retry and clears status.failed: a spec.retry value is acted on
//     once, however often the operator restarts.
//   - A retry resumes at a step whose preconditions still stand: a node
//     the failure put back as it was (uncordoned again by us) starts at its
//     first step, and a failed wait-ready runs its runtime step again.

// observeSpec records that the pass has seen the spec as it is now.
func observeSpec(in *v1.Installation) {
	in.Status.ObservedGeneration = in.Generation
	in.Status.ObservedRetry = in.Spec.Retry
}

// specSeen reports whether the status has seen the spec as it is now: a
// Failed installation then waits.
func specSeen(in *v1.Installation) bool {
	return in.Status.ObservedGeneration == in.Generation && in.Status.ObservedRetry == in.Spec.Retry
}

// recordFailed records in status.failed that the run in direction op failed
// at t for cause, and where a retry resumes. putBack: the failure put t's
// node back as it was before the run (we uncordoned it), so none of its
// earlier steps stands any more. Call it after observeSpec: the retry line
// names the next spec.retry.
func recordFailed(in *v1.Installation, op v1.Operation, t task, cause error, putBack bool) {
	in.Status.Failed = &v1.FailedRun{Op: op, Step: t.Step, Node: t.Node, Cause: cause.Error()}
	setRetryStep(in, putBack)
}

// setRetryStep sets where a retry of the recorded failure resumes, and the
// line that says so.
func setRetryStep(in *v1.Installation, putBack bool) {
	f := in.Status.Failed
	switch {
	case f.Node != "" && putBack:
		f.RetryStep = firstNodeStep(f.Op == v1.OperationUndo)
	case f.Step == v1.StepWaitReady:
		// The host run it waited for ended (rolled back, or its fate is
		// unknown): only the runtime step starts one again.
		f.RetryStep = v1.StepRuntime
	default:
		f.RetryStep = f.Step
	}
	f.Retry = retryLine(in, putBack)
}

// retryLine says what a retry does and how to ask for it, e.g. "set
// spec.retry to 1: the install resumes at node w1's runtime step (its
// wait-ready failed)".
func retryLine(in *v1.Installation, putBack bool) string {
	st := &in.Status
	f := st.Failed
	where := "the store step"
	if f.Node != "" {
		where = fmt.Sprintf("node %s's %s step", f.Node, f.RetryStep)
	} else if ha := st.HA; ha != nil && ha.Step != "" && ha.Op == f.Op {
		where = fmt.Sprintf("the store's HA step %d of %d (%s)", ha.Index+1, len(haSequence(ha)), ha.Step)
	}
	line := fmt.Sprintf("set spec.retry to %d: the %s resumes at %s", st.ObservedRetry+1, f.Op, where)
	switch {
	case f.Node != "" && putBack:
		line += fmt.Sprintf(" (its %s failed and it was put back as it was before the run)", f.Step)
	case f.RetryStep != f.Step:
		line += fmt.Sprintf(" (its %s failed)", f.Step)
	}
	return line
}

// resumeAt is where a run in the spec's direction starts: t, the first
// task firstTask found, or, when the run retries the failed one (same
// direction, same node or the store), the step status.failed names.
func resumeAt(st *v1.InstallationStatus, undo bool, t task) (task, bool) {
	f := st.Failed
	if f == nil || st.Phase != v1.PhaseFailed || f.Op != opFor(undo) || f.Node != t.Node {
		return t, false
	}
	return task{Step: f.RetryStep, Node: t.Node}, true
}

// opFor is the operation of a run in the given direction.
func opFor(undo bool) v1.Operation {
	if undo {
		return v1.OperationUndo
	}
	return v1.OperationInstall
}

// restartNode starts the clock of a node whose run resumes mid-way: its
// deadline counts from now, and its host runs before now (the failed run's)
// are not read as this run's (they are older than --since).
func restartNode(st *v1.InstallationStatus, name string, now *metav1.Time) {
	if i := nodeIndex(st, name); i >= 0 {
		n := &st.Nodes[i]
		n.Start, n.End, n.Message = now, nil, ""
	}
}
