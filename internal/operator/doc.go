// Package operator is the QuantyKube operator: one reconciler for the
// cluster-scoped Installation "quantykube" (api/v1alpha1) that moves the
// cluster's datastore and the runtime of selected nodes onto QuantyKube, one
// step per pass, and back when spec.undo is set.
//
// Invariants:
//   - A pass reads the world, acts on the one step recorded in status, and
//     requeues. The next step is written to status before it is acted on, so
//     an operator restarted at any point (its own node is drained) resumes it.
//   - A pass computes the new status and writes it once, at its end
//     (Reconciler.record); its Events are sent only with that write. A pass
//     that meets a transient error records nothing and is retried. Passes run
//     one at a time (ctrlOptions).
//   - status.attempt numbers the step's host pod and nothing else; the
//     wait-ready journal checks are status.journalCheck, a node's cordon
//     record its own fields (api/v1alpha1).
//   - Ready, Progressing and Degraded follow from the status each pass
//     computes (setConditions), each with its own reason and message.
//   - Host work (install/undo store|runtime) runs in short-lived privileged
//     pods (hostrun) that start a transient systemd unit on the host and
//     follow its journal; a pod that dies is replaced by one that reads the
//     journal first, never by a blind rerun (ADR 201).
//   - A node is uncordoned only if we cordoned it (NodeStatus.WasCordoned):
//     at the end of its run, and after a failure that left it as it was
//     before the run (putback.go); a node whose host state is unknown
//     stays cordoned.
//   - A Failed installation waits for a spec change; a retry (spec.retry)
//     resumes at status.failed.retryStep and is acted on once
//     (status.observedRetry, retry.go).
//   - One control-plane node: the store step is one host pod (`install|undo
//     store`). An odd number of 3 or more: it is the HA move (ADR 202,
//     step_store_ha.go), hamove's node steps in hamove.Order, one host pod
//     on the step's node at a time, the step recorded in status.ha before
//     its pod exists; undo runs the undo of the steps done.
//   - Runtime moves of nodes (control planes included) run one node at a
//     time, never while the store step runs: a move does the store first,
//     an undo does it last.
//   - Bad input (not kubeadm, an even number of control planes, a timeout
//     that is not positive) sets Degraded with what to do and touches
//     nothing.
//   - A node past spec.nodeTimeout, and the store step of one control plane
//     past spec.storeTimeout, fail at once and are rolled back by their own
//     undo when host work may have begun (deadline.go).
//
// +kubebuilder:rbac:groups=install.quantyroot.io,resources=installations,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=install.quantyroot.io,resources=installations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete,namespace=quantykube-system
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups=apps,resources=daemonsets;replicasets;statefulsets,verbs=get
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get,namespace=kube-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch,namespace=quantykube-system
package operator
