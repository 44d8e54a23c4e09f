package hamove

import "slices"

// Node steps, in the order a move runs them (Order).
const (
	// StepFirst makes the store's first member on this node from an etcd
	// snapshot restored with revisions, mirroring etcd.
	StepFirst = "first"
	// StepJoin adds this node's member to the store (member add) and waits
	// until it has caught up.
	StepJoin = "join"
	// StepSwitch restarts this node's API server on its local member
	// (only --etcd-servers changes).
	StepSwitch = "switch"
	// StepCutover makes the store the owner of the data, once no API server
	// uses etcd.
	StepCutover = "cutover"

	// StepStopEtcd saves this node's etcd member and stops it.
	StepStopEtcd = "stop-etcd"
	// StepReplayTo saves a snapshot of the store and has it replay its
	// changes after it onto etcd.
	StepReplayTo = "replay-to"
	// StepRestoreEtcd restores this node's etcd member from the replay-to
	// snapshot (its old data dir set aside) and starts it.
	StepRestoreEtcd = "restore-etcd"
	// StepCutback makes the store a mirror of etcd again.
	StepCutback = "cutback"
	// StepSwitchBack restarts this node's API server on etcd.
	StepSwitchBack = "switch-back"
	// StepLeave removes this node's member from the store and stops it
	// (its data kept).
	StepLeave = "leave"
)

// InstallSteps and UndoSteps are the node steps of each direction.
var (
	InstallSteps = []string{StepFirst, StepJoin, StepSwitch, StepCutover}
	UndoSteps    = []string{StepStopEtcd, StepReplayTo, StepRestoreEtcd, StepCutback, StepSwitchBack, StepLeave}
)

// KnownStep reports whether s is a step of undo (undo) or install.
func KnownStep(s string, undo bool) bool {
	if undo {
		return slices.Contains(UndoSteps, s)
	}
	return slices.Contains(InstallSteps, s)
}

// NodeStep is one step to run on one node.
type NodeStep struct {
	Node string `json:"node"`
	Step string `json:"step"`
}

// Order is the sequence of node steps that moves the control plane of
// nodes (their names, the first one first) in one direction. Each node
// step's preflight checks that the cluster is where the step belongs, so
// running them in this order, one at a time, is the only way through.
func Order(nodes []string, undo bool) []NodeStep {
	var out []NodeStep
	each := func(step string) {
		for _, n := range nodes {
			out = append(out, NodeStep{n, step})
		}
	}
	if !undo {
		out = append(out, NodeStep{nodes[0], StepFirst})
		for _, n := range nodes[1:] {
			out = append(out, NodeStep{n, StepJoin})
		}
		each(StepSwitch)
		return append(out, NodeStep{nodes[0], StepCutover})
	}
	each(StepStopEtcd)
	out = append(out, NodeStep{nodes[0], StepReplayTo})
	each(StepRestoreEtcd)
	out = append(out, NodeStep{nodes[0], StepCutback})
	each(StepSwitchBack)
	// The first node's member leaves last: it holds the kubeadm-config the
	// cut-over saved, and the last member keeps the store's data.
	for i := len(nodes) - 1; i >= 0; i-- {
		out = append(out, NodeStep{nodes[i], StepLeave})
	}
	return out
}
