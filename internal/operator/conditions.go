package operator

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// failure is what Degraded reports: why a run stopped or was refused, and
// what to do. nil means nothing failed.
type failure struct {
	reason  string // v1.ReasonStepFailed, v1.ReasonNodeTimedOut, ...
	message string
}

// setConditions derives Ready, Progressing and Degraded from the status just
// computed and f, each with its own reason and message and the spec
// generation the status refers to:
//   - Ready is True when the goal stands: phase Moved or Undone with the run
//     done. Otherwise its reason is the phase.
//   - Progressing is True while a step is recorded (a rollback included), or
//     while a run is under way between two steps (phase Moving or Undoing,
//     nothing failed: the spec turned around and the run back starts next).
//   - Degraded is True with f's reason and message.
//
// Callers set st.Message (the one-line status) first: Progressing reports it.
func setConditions(in *v1.Installation, f *failure) {
	st := &in.Status
	ready := (st.Phase == v1.PhaseMoved || st.Phase == v1.PhaseUndone) && st.Step == v1.StepDone
	stepRecorded := st.Step != "" && st.Step != v1.StepDone
	progressing := stepRecorded || (f == nil && (st.Phase == v1.PhaseMoving || st.Phase == v1.PhaseUndoing))
	goal := goalPhase(undoing(in))

	readyC := condition(v1.ConditionReady, ready, v1.ReasonGoalReached, summary(in))
	if !ready {
		phase := st.Phase
		if phase == "" {
			phase = v1.PhasePending
		}
		readyC = condition(v1.ConditionReady, false, string(phase), fmt.Sprintf("the spec asks for %s; the phase is %s", goal, phase))
	}
	progC := condition(v1.ConditionProgressing, true, v1.ReasonStepRunning, st.Message)
	if !progressing {
		progC = condition(v1.ConditionProgressing, false, v1.ReasonIdle, idleMessage(in, ready))
	}
	degC := condition(v1.ConditionDegraded, false, v1.ReasonAsExpected, "nothing failed")
	if f != nil {
		degC = condition(v1.ConditionDegraded, true, f.reason, f.message)
	}
	for _, c := range []metav1.Condition{readyC, progC, degC} {
		c.ObservedGeneration = in.Generation
		meta.SetStatusCondition(&st.Conditions, c)
	}
}

func condition(typ string, ok bool, reason, msg string) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg}
}

// idleMessage is Progressing's message when no step runs.
func idleMessage(in *v1.Installation, ready bool) string {
	switch {
	case ready:
		return "no step runs: the goal stands"
	case in.Status.Phase == v1.PhaseFailed && in.Status.Failed != nil:
		return "no step runs: " + in.Status.Failed.Retry
	case in.Status.Phase == v1.PhaseFailed:
		return "no step runs: a spec change starts the next run"
	}
	return "no step runs"
}
