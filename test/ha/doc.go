// Package ha measures the API's availability on a cluster with several
// control planes (scripts/kubeadm.sh up --control-planes 3): a client on the
// load balancer reads and writes every 100 ms (harness.Prober) while each
// API server is stopped and started in turn, its static pod manifest moved
// out and back as a datastore move does. The figures are the baseline an HA
// move is measured against. `scripts/kubeadm.sh ha` runs it; without QK_HA=1
// it skips.
package ha
