// Package noderuntime holds the end-to-end test of `quantykube install
// runtime` and `quantykube undo runtime` on a real kubeadm cluster from
// scripts/kubeadm.sh: `scripts/kubeadm.sh node` runs it. A worker moves onto
// quantykube runtime and back with its Deployment and DaemonSet pods running,
// then the control-plane node with its static pods; then a failure and a
// kill -9 at every step on the worker; then bad input.
package noderuntime
