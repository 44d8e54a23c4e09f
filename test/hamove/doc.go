// Package hamove holds the end-to-end test of the HA datastore move
// (`quantykube install|undo store --ha STEP` on each control-plane node,
// driven by internal/install/hamove's coordinator) on a real kubeadm
// cluster of three control-plane nodes from scripts/kubeadm.sh. It skips
// unless QK_HAMOVE_KUBECONFIG names such a cluster.
package hamove
