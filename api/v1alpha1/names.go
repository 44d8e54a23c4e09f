package v1alpha1

// The names the Installation's status and the operator's host pods use: one
// Go type each, so a step is never compared with a node state or a phase.
// Their values are the wire format and do not change.

// Phase is a coarse state: the Installation's (status.phase) and the
// store's (status.store).
// +kubebuilder:validation:Enum=Pending;Moving;Moved;Undoing;Undone;Failed
type Phase string

// Phases. Moving and Undoing are the only phases in which steps run (and
// Failed, while a node that passed its deadline is rolled back).
const (
	PhasePending Phase = "Pending"
	PhaseMoving  Phase = "Moving"
	PhaseMoved   Phase = "Moved"
	PhaseUndoing Phase = "Undoing"
	PhaseUndone  Phase = "Undone"
	PhaseFailed  Phase = "Failed"
)

// Step is one step of a run (status.step).
// +kubebuilder:validation:Enum=store;preflight;cordon;drain;runtime;wait-ready;uncordon;done;rollback;rollback-wait
type Step string

// Step names, in the order they run for one node (StepStore runs once, first
// when moving, last when undoing). StepDone is recorded when a run ended well.
const (
	StepStore Step = "store"
	// StepPreflight runs the node's install checks on the node before it is
	// cordoned or drained (moving only): a refusal leaves it untouched.
	StepPreflight Step = "preflight"
	StepCordon    Step = "cordon"
	StepDrain     Step = "drain"
	StepRuntime   Step = "runtime"
	StepWaitReady Step = "wait-ready"
	StepUncordon  Step = "uncordon"
	StepDone      Step = "done"
)

// Steps of a node whose move passed its deadline after host work began: its
// own undo runs (rollback), then the operator waits until the node is Ready
// on its old runtime (rollback-wait). The phase is already Failed. A
// one-control-plane store move past spec.storeTimeout is rolled back the
// same way (rollback runs undo store; there is no rollback-wait).
const (
	StepRollback     Step = "rollback"
	StepRollbackWait Step = "rollback-wait"
)

// NodeState is one node's state (status.nodes[].state): Pending, the name of
// the step that runs on it (see Step.NodeState), Moved, Undone or Failed.
// +kubebuilder:validation:Enum=Pending;preflight;cordon;drain;runtime;wait-ready;uncordon;rollback;Moved;Undone;Failed
type NodeState string

// Node states other than a running step's name.
const (
	NodeStatePending NodeState = "Pending"
	NodeStateMoved   NodeState = "Moved"
	NodeStateUndone  NodeState = "Undone"
	NodeStateFailed  NodeState = "Failed"
)

// NodeState is the state of a node while s runs on it: the step's name. A
// rollback keeps the node in StepRollback's state until it ends.
func (s Step) NodeState() NodeState { return NodeState(s) }

// Operation is what a run does: install (onto QuantyKube) or undo (back).
// It names the host command (`quantykube install|undo`), the host pods'
// label install.quantyroot.io/op and the operator's metrics.
type Operation string

// Operations.
const (
	OperationInstall Operation = "install"
	OperationUndo    Operation = "undo"
)

// Subject is what a host operation moves: the store (the control plane's
// datastore) or a node's runtime. It names the host command's subject and
// the host pods' label install.quantyroot.io/subject.
type Subject string

// Subjects.
const (
	SubjectStore   Subject = "store"
	SubjectRuntime Subject = "runtime"
)

// Condition types. Each has its own reason and message, and the spec
// generation it refers to (observedGeneration).
const (
	// ConditionReady is True when everything the spec asks for stands
	// (phase Moved or Undone, no step running).
	ConditionReady = "Ready"
	// ConditionProgressing is True while a run is under way.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when something failed or was refused; its
	// message says what to do.
	ConditionDegraded = "Degraded"
)

// Condition reasons. Ready's reason is ReasonGoalReached when True, else
// the phase (Pending when there is none yet).
const (
	ReasonGoalReached = "GoalReached" // Ready
	ReasonStepRunning = "StepRunning" // Progressing
	ReasonIdle        = "Idle"        // Progressing: no step runs
	ReasonAsExpected  = "AsExpected"  // Degraded: nothing failed
	// ReasonStepFailed: a step failed; the installers put their own work
	// back (Degraded).
	ReasonStepFailed = "StepFailed"
	// ReasonNodeTimedOut: a node passed spec.nodeTimeout after host work
	// began and is rolled back by its own undo (Degraded).
	ReasonNodeTimedOut = "NodeTimedOut"
	// ReasonStoreTimedOut: the store step passed spec.storeTimeout; a
	// one-control-plane move is rolled back by undo store (Degraded).
	ReasonStoreTimedOut = "StoreTimedOut"
	// ReasonInvalidSpec: the spec asks for something the operator cannot
	// do as written (a timeout that is not positive); nothing was touched
	// (Degraded).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonUnsupported: the cluster is not one the operator can move (not
	// kubeadm, not exactly one control plane); nothing was touched
	// (Degraded).
	ReasonUnsupported = "Unsupported"
	// ReasonNotTheInstallation: an Installation not named Name (Degraded).
	ReasonNotTheInstallation = "NotTheInstallation"
)
