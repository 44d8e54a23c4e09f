// Package move holds the end-to-end test of `quantykube install store` and
// `quantykube undo store` on a real kubeadm cluster from scripts/kubeadm.sh:
// `scripts/kubeadm.sh move` runs it.
package move
