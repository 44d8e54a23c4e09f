package operator

import (
	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// task is one step of a run: the store, or a step on one node.
type task struct {
	Step v1.Step
	Node string // "" for the store
}

// nodeSteps is the order of one node's steps when moving; undoing skips the
// preflight (the node's undo checks run inside its runtime step).
var nodeSteps = []v1.Step{v1.StepPreflight, v1.StepCordon, v1.StepDrain, v1.StepRuntime, v1.StepWaitReady, v1.StepUncordon}

// firstNodeStep is where a node's run starts in the given direction.
func firstNodeStep(undo bool) v1.Step {
	if undo {
		return v1.StepCordon
	}
	return v1.StepPreflight
}

// undoing reports the direction the spec asks for.
func undoing(in *v1.Installation) bool { return in.Spec.Undo }

// runPhase is the phase of a run in the spec's direction.
func runPhase(undo bool) v1.Phase {
	if undo {
		return v1.PhaseUndoing
	}
	return v1.PhaseMoving
}

// goalPhase is the phase a finished run ends in.
func goalPhase(undo bool) v1.Phase {
	if undo {
		return v1.PhaseUndone
	}
	return v1.PhaseMoved
}

// goalNodeState is the state of a node whose run ended well.
func goalNodeState(undo bool) v1.NodeState {
	if undo {
		return v1.NodeStateUndone
	}
	return v1.NodeStateMoved
}

// opOf is the operation of the run under way: undo while undoing, or when
// the spec asks for it and no move runs; else install.
func opOf(in *v1.Installation) v1.Operation {
	if in.Status.Phase == v1.PhaseUndoing || (in.Status.Phase != v1.PhaseMoving && in.Spec.Undo) {
		return v1.OperationUndo
	}
	return v1.OperationInstall
}

// firstTask is where a run in the given direction starts, or ok=false when
// the goal already stands. Moving: the store first, then each node not yet
// Moved, in status order. Undoing: each node that was touched, in reverse
// order, then the store.
func firstTask(st *v1.InstallationStatus, storeWanted, undo bool) (task, bool) {
	if !undo {
		if storeWanted && st.Store != v1.PhaseMoved {
			return task{Step: v1.StepStore}, true
		}
		for _, n := range st.Nodes {
			if n.State != v1.NodeStateMoved {
				return task{Step: firstNodeStep(false), Node: n.Name}, true
			}
		}
		return task{}, false
	}
	for i := len(st.Nodes) - 1; i >= 0; i-- {
		if s := st.Nodes[i].State; s != v1.NodeStatePending && s != v1.NodeStateUndone {
			return task{Step: firstNodeStep(true), Node: st.Nodes[i].Name}, true
		}
	}
	if s := st.Store; s != "" && s != v1.PhasePending && s != v1.PhaseUndone {
		return task{Step: v1.StepStore}, true
	}
	return task{}, false
}

// nextTask is the task after cur once cur has ended well and its result is
// recorded in st (the node's state is Moved or Undone after its last step).
func nextTask(st *v1.InstallationStatus, storeWanted, undo bool, cur task) (task, bool) {
	if cur.Node != "" {
		for i, s := range nodeSteps {
			if s == cur.Step && i+1 < len(nodeSteps) {
				return task{Step: nodeSteps[i+1], Node: cur.Node}, true
			}
		}
	}
	return firstTask(st, storeWanted, undo)
}

// nodeIndex is the position of name in st.Nodes, or -1.
func nodeIndex(st *v1.InstallationStatus, name string) int {
	for i := range st.Nodes {
		if st.Nodes[i].Name == name {
			return i
		}
	}
	return -1
}
