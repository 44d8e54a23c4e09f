// Package noderuntime holds the end-to-end test of `quantykube install
// runtime` and `quantykube undo runtime` on a real kubeadm cluster from
// scripts/kubeadm.sh: `scripts/kubeadm.sh node` runs it. A worker moves onto
// quantykube runtime and back with its Deployment and DaemonSet pods running,
// then the control-plane node with its static pods; a failure and a kill -9
// at every step on the worker; bad input; the pods' restart time with and
// without the prepull (QK_NR_MEASURE=1 adds rounds and the control plane);
// and, last, the control-plane node with its API server on quantykube store.
// The tests share one cluster: each leaves it as it found it (every node on
// containerd, the API server on etcd, nodes uncordoned).
package noderuntime
