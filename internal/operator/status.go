package operator

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// setConditions sets Ready, Progressing and Degraded together, each with the
// current generation. degradedReason "" means not degraded.
func (r *Reconciler) setConditions(in *v1.Installation, ready, progressing bool, degradedReason, msg string) {
	set := func(t string, ok bool, reason string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&in.Status.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: in.Generation,
		})
	}
	set(v1.ConditionReady, ready, pick(ready, "GoalReached", string(in.Status.Phase)))
	set(v1.ConditionProgressing, progressing, pick(progressing, "StepRunning", "Idle"))
	set(v1.ConditionDegraded, degradedReason != "", pick(degradedReason != "", degradedReason, "AsExpected"))
}

func pick(c bool, a, b string) string {
	if c {
		return a
	}
	if b == "" {
		return "Pending"
	}
	return b
}

// opOf is "install" or "undo" for the running phase.
func opOf(in *v1.Installation) string {
	if in.Status.Phase == v1.PhaseUndoing || (in.Status.Phase != v1.PhaseMoving && in.Spec.Undo) {
		return "undo"
	}
	return "install"
}

// stepName names a task for people: "install store", "node w1: drain".
func stepName(in *v1.Installation, t task) string {
	if t.Node == "" {
		return opOf(in) + " store"
	}
	return fmt.Sprintf("node %s: %s", t.Node, t.Step)
}

// progressLine reads like "store moved; node 1 of 2 moving: draining (12 pods left)".
func progressLine(in *v1.Installation, what string) string {
	st := &in.Status
	verb := "moving"
	if st.Phase == v1.PhaseUndoing {
		verb = "undoing"
	}
	var parts []string
	if st.Node == "" && st.Step == v1.StepStore {
		parts = append(parts, "store "+verb+": "+what)
	} else if st.Store != "" {
		parts = append(parts, "store "+strings.ToLower(st.Store))
	}
	if st.Node != "" {
		parts = append(parts, fmt.Sprintf("node %d of %d %s (%s): %s: %s", nodeIndex(st, st.Node)+1, len(st.Nodes), verb, st.Node, st.Step, what))
	}
	return strings.Join(parts, "; ")
}

// summary is the message of a finished run.
func summary(in *v1.Installation) string {
	st := &in.Status
	var parts []string
	if st.Store != "" {
		parts = append(parts, "store "+strings.ToLower(st.Store))
	}
	counts := map[string]int{}
	for _, n := range st.Nodes {
		counts[n.State]++
	}
	for _, s := range []string{string(v1.PhaseMoved), string(v1.PhaseUndone), string(v1.PhasePending)} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d of %d nodes %s", counts[s], len(st.Nodes), strings.ToLower(s)))
		}
	}
	if len(parts) == 0 {
		return "nothing asked: spec.store is false and no node matches spec.runtime.nodeSelector"
	}
	return strings.Join(parts, "; ")
}
