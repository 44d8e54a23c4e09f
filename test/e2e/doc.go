// Package e2e drives the operator end to end on a real kubeadm cluster from
// scripts/kubeadm.sh (`scripts/kubeadm.sh e2e` and `demo` run it): the
// release of the tree (scripts/release.sh) installed as a person installs it:
// its OCI archive pushed to the cluster's registry, its quantykube.yaml (the
// image pinned by digest) applied,
// a labelled worker, thousands of objects; the Installation reaches Moved
// (store on QuantyKube's store, worker on QuantyKube's runtime, every
// object's resourceVersion kept, every pod Running), then Undone with one
// patch, and after each a pod deleted on the worker is replaced at once.
// The operator pod is killed once at every step it records. A worker whose
// host preflight refuses (and then the operator's own node with nowhere to
// go) turns the Installation Failed with the reason, the worker never
// cordoned and its pods kept, and the same Installation goes on to Moved
// once the cause is fixed. A node with an injected fault turns the
// Installation Failed within its deadline with the node rolled back and
// the rest untouched. kube-controller-manager and kube-scheduler keep their
// leader leases throughout.
package e2e
