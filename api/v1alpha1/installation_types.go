package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Name is the one Installation the operator acts on; any other is refused.
const Name = "quantykube"

// RuntimeLabel is the node label that asks for QuantyKube's runtime, with
// the value RuntimeLabelValue. It is the default spec.runtime.nodeSelector.
const (
	RuntimeLabel      = "install.quantyroot.io/runtime"
	RuntimeLabelValue = "quantykube"
)

// Installation asks for a cluster on QuantyKube: its datastore (the store)
// and the container runtime of selected nodes. Setting spec.undo moves it
// all back. Exactly one Installation, named "quantykube", is acted on.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=qki
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'quantykube'",message="the Installation must be named quantykube (one per cluster)"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.status.step`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.node`
// +kubebuilder:printcolumn:name="Undo",type=boolean,JSONPath=`.spec.undo`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`
// +kubebuilder:printcolumn:name="Retry",type=string,JSONPath=`.status.failed.retry`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Installation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InstallationSpec   `json:"spec,omitempty"`
	Status InstallationStatus `json:"status,omitempty"`
}

// InstallationSpec is what the cluster should stand on.
type InstallationSpec struct {
	// Store moves the API server's datastore from etcd onto quantykube store.
	// +kubebuilder:default=true
	// +optional
	Store bool `json:"store"`

	// Runtime selects the nodes whose container runtime becomes QuantyKube's.
	// +optional
	Runtime RuntimeSpec `json:"runtime,omitempty"`

	// Undo moves everything back: the nodes first, then the store.
	// +optional
	Undo bool `json:"undo,omitempty"`

	// NodeTimeout bounds one node's move (cordon to Ready); past it the
	// Installation turns Failed and the node is left as its own undo left it.
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	NodeTimeout *metav1.Duration `json:"nodeTimeout,omitempty"`

	// StoreTimeout bounds the store step (one host run of install or undo
	// store; on several control planes every node step of the HA move
	// together). Past it the step fails; a one-control-plane move is then
	// rolled back by undo store, as a node past spec.nodeTimeout is by its
	// own undo. It must be positive.
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	StoreTimeout *metav1.Duration `json:"storeTimeout,omitempty"`

	// Drain is how a node is drained before its runtime moves (both ways).
	// +optional
	Drain DrainSpec `json:"drain,omitempty"`

	// Retry asks for a retry of a Failed installation: set it to any value
	// other than status.observedRetry (raise it by one). The retry resumes
	// the failed run where status.failed.retryStep says; kubectl get's
	// Retry column says what it will do. A value is acted on once: the
	// operator records it in status.observedRetry in the same write that
	// starts the retried step.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Retry int64 `json:"retry,omitempty"`
}

// DrainSpec is how a node is drained: as kubectl drain --ignore-daemonsets
// does, with kubectl's own pod filters.
type DrainSpec struct {
	// DeleteEmptyDirData lets the drain evict pods with emptyDir volumes,
	// deleting that data, as kubectl drain --delete-emptydir-data does.
	// False (kubectl's default): a node running such a pod is refused
	// before it is cordoned, with the pods named; nothing is changed.
	// +optional
	DeleteEmptyDirData bool `json:"deleteEmptyDirData,omitempty"`
}

// RuntimeSpec selects nodes for QuantyKube's runtime.
type RuntimeSpec struct {
	// NodeSelector is matched against node labels; nodes matching every
	// entry are moved, one at a time, in name order. Empty selects none.
	// +kubebuilder:default={"install.quantyroot.io/runtime":"quantykube"}
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// InstallationStatus is written before every step, so an operator restarted
// at any point reads where it was and goes on.
type InstallationStatus struct {
	// ObservedGeneration is the spec generation the phase refers to.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ObservedRetry is the spec.retry the operator has seen: written with
	// observedGeneration when a run starts or fails. A spec.retry equal to
	// it asks for nothing, so a retry is acted on once, whatever restarts
	// the operator.
	// +optional
	ObservedRetry int64 `json:"observedRetry,omitempty"`
	// Phase is the Installation's coarse state: Pending, Moving, Moved,
	// Undoing, Undone or Failed.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// Step is the step now running (store, preflight, cordon, drain, runtime,
	// wait-ready, uncordon; rollback, rollback-wait for a node that passed its
	// deadline, rollback for a store move that passed spec.storeTimeout),
	// done when a run ended well, or empty.
	// +optional
	Step Step `json:"step,omitempty"`
	// Node is the node Step acts on ("" for the store).
	// +optional
	Node string `json:"node,omitempty"`
	// StepStarted is when Step began.
	// +optional
	StepStarted *metav1.Time `json:"stepStarted,omitempty"`
	// Attempt numbers the current step's host pod: 0 before the first is
	// recorded, 1 for the first, N+1 once pod N died without a result (at
	// most 3, then the step fails). It is written before the pod it names is
	// created, so a restarted operator follows that pod instead of starting
	// another. It means nothing else: the wait-ready step's journal checks
	// are numbered by journalCheck, a node's cordon record is
	// nodes[].cordonRecorded.
	// +optional
	Attempt int32 `json:"attempt,omitempty"`
	// JournalCheck numbers the wait-ready step's host-journal check pods: 0
	// while no check is due, N once check pod N is recorded (written before
	// it is created). A node still Ready on its old runtime past the check
	// grace is checked through its host journal, one pod after another,
	// until the journal says the run rolled back or the node switches.
	// +optional
	JournalCheck int32 `json:"journalCheck,omitempty"`
	// Message says in one line where things are.
	// +optional
	Message string `json:"message,omitempty"`
	// Store is the store's state: Pending, Moving, Moved, Undoing, Undone or
	// Failed.
	// +optional
	Store Phase `json:"store,omitempty"`
	// HA is where the store's HA move stands on a control plane of several
	// nodes (absent with one control plane): written before each of its
	// host steps, so a restarted operator goes on at the recorded one.
	// +optional
	HA *HAStatus `json:"ha,omitempty"`
	// Nodes is each selected node's state, in the order they are moved.
	// +optional
	// +listType=map
	// +listMapKey=name
	Nodes []NodeStatus `json:"nodes,omitempty"`
	// Failed is the run that failed: where, why, and where a retry
	// resumes. Set when a run fails (while a failed step is rolled back
	// too), cleared when the next run starts.
	// +optional
	Failed *FailedRun `json:"failed,omitempty"`
	// Conditions: Ready (everything asked for stands), Progressing (a step
	// runs), Degraded (something failed or was refused; the message says
	// what to do).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Operator is the build of the operator that wrote this status: every
	// status write records it, and an operator that starts writes it
	// (its first pass), so after an upgrade it names the one now running.
	// +optional
	Operator *OperatorStatus `json:"operator,omitempty"`
}

// OperatorStatus is which build of the operator runs.
type OperatorStatus struct {
	// Version is the operator's release version (`quantykube version`).
	Version string `json:"version"`
	// Commit is the commit it was built from: 12 hex digits, with "-dirty"
	// for a tree with changes not committed; empty when unknown (a build
	// other than scripts/release.sh's).
	// +optional
	Commit string `json:"commit,omitempty"`
	// Image is the image its host pods run (its --image or
	// QUANTYKUBE_IMAGE): the reference a release's quantykube.yaml pins by
	// digest.
	// +optional
	Image string `json:"image,omitempty"`
}

// HAStatus is the store's HA move over several control-plane nodes: the
// node steps of `quantykube install|undo store --ha` in hamove's order, one
// host pod each, one at a time.
type HAStatus struct {
	// ControlPlanes are the control-plane nodes, the first one first, as
	// they were when the move began (the order of steps is derived from
	// them).
	ControlPlanes []string `json:"controlPlanes"`
	// Op is the direction of the sequence under way: install or undo.
	Op Operation `json:"op"`
	// Index is the position of Step in the sequence of Op.
	Index int32 `json:"index"`
	// Step is the node step at Index, as "STEP/NODE" (join/cp2), or ""
	// once the sequence has ended.
	// +optional
	Step string `json:"step,omitempty"`
	// InstallDone is how many steps of the install sequence are done; an
	// undo runs the undo steps of what they did.
	// +optional
	InstallDone int32 `json:"installDone,omitempty"`
}

// FailedRun records a run that failed and where its retry resumes.
type FailedRun struct {
	// Op is the direction of the run that failed. A retry in that direction
	// resumes at RetryStep; a run the other way (spec.undo changed) starts
	// from its beginning.
	Op Operation `json:"op"`
	// Step is the step that failed, on Node ("" for the store).
	Step Step `json:"step"`
	// +optional
	Node string `json:"node,omitempty"`
	// Cause says in one line why it failed.
	Cause string `json:"cause"`
	// RetryStep is where a retry resumes, on Node: the failed step itself,
	// or an earlier one when the failure put back what the earlier steps
	// did (a node uncordoned again starts at its first step; a failed
	// wait-ready runs its runtime step again). Earlier nodes and the store,
	// when done, are not done again.
	RetryStep Step `json:"retryStep"`
	// Retry says in one line what a retry does and how to ask for it
	// (kubectl get's Retry column).
	Retry string `json:"retry"`
}

// NodeStatus is one node's move.
type NodeStatus struct {
	Name string `json:"name"`
	// State is Pending, the name of the step that runs on the node, Moved,
	// Undone or Failed.
	State NodeState `json:"state"`
	// WasCordoned records that the node was already unschedulable before we
	// cordoned it; then it is not uncordoned at the end, nor after a failure
	// that put the node back. Meaningful once CordonRecorded is set.
	// +optional
	WasCordoned bool `json:"wasCordoned,omitempty"`
	// CordonRecorded says WasCordoned was written, before the node was first
	// cordoned by this run; a run that resumes a failed node keeps it.
	// +optional
	CordonRecorded bool `json:"cordonRecorded,omitempty"`
	// +optional
	Start *metav1.Time `json:"start,omitempty"`
	// +optional
	End *metav1.Time `json:"end,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// InstallationList is a list of Installations.
//
// +kubebuilder:object:root=true
type InstallationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Installation `json:"items"`
}
