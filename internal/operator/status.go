package operator

import (
	"fmt"
	"strings"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// stepName names a task for people: "install store", "node w1: drain".
func stepName(in *v1.Installation, t task) string {
	if t.Node == "" {
		return string(opOf(in)) + " store"
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
		parts = append(parts, "store "+strings.ToLower(string(st.Store)))
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
		parts = append(parts, "store "+strings.ToLower(string(st.Store)))
	}
	counts := map[v1.NodeState]int{}
	for _, n := range st.Nodes {
		counts[n.State]++
	}
	for _, s := range []v1.NodeState{v1.NodeStateMoved, v1.NodeStateUndone, v1.NodeStatePending} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d of %d nodes %s", counts[s], len(st.Nodes), strings.ToLower(string(s))))
		}
	}
	if len(parts) == 0 {
		return "nothing asked: spec.store is false and no node matches spec.runtime.nodeSelector"
	}
	return strings.Join(parts, "; ")
}
