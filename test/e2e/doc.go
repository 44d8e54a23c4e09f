// Package e2e drives the operator end to end on a real kubeadm cluster from
// scripts/kubeadm.sh (`scripts/kubeadm.sh e2e` and `demo` run it): the
// manifest deploy/quantykube.yaml applied with the image the harness built,
// a labelled worker, thousands of objects; the Installation reaches Moved
// (store on QuantyKube's store, worker on QuantyKube's runtime, every
// object's resourceVersion kept, every pod Running), then Undone with one
// patch. The operator pod is killed once at every step it records, and a
// node with an injected fault turns the Installation Failed within its
// deadline with the node rolled back and the rest untouched.
package e2e
