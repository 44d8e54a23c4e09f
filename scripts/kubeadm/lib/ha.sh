# shellcheck shell=bash
# ha.sh: `ha` measures the API's availability through the load balancer of a
# cluster with several control planes while its API servers restart one at a
# time (each static pod manifest moved out and back, as a datastore move
# does): test/ha reads and writes a ConfigMap every 100 ms through the LB and
# logs the longest read and write gaps. It is the baseline an HA move is
# measured against. Needs `scripts/kubeadm.sh up --control-planes 3`.
#
# QK_HA_RUN selects tests (default: all of test/ha); QK_HA_ROUNDS (default 1)
# how many times every API server is restarted.

cmd_ha() {
	[[ -f $QK_STATE/kubeconfig ]] || die "no cluster: run 'scripts/kubeadm.sh up --control-planes 3' first"
	is_lb "$(lb_name)" 2>/dev/null || die "no load balancer in $QK_STATE (a one-control-plane cluster): run 'scripts/kubeadm.sh up --control-planes 3'"
	(($(state_control_planes | wc -l) > 1)) || die "one control plane behind $(lb_name): restarting it stops the API; run 'scripts/kubeadm.sh grow --control-planes 3' first"
	log "ha: API servers restarted one at a time while a client on $(lb_name) reads and writes every 100 ms (go test ./test/ha)"
	# The test reaches the nodes through scripts/kubeadm.sh exec: it needs this cluster's parameters.
	export QK_CLUSTER QK_BRIDGE QK_NODE_NET QK_POD_NET QK_CHAIN QK_STATE QK_CACHE
	(cd "$QK_ROOT" && QK_HA=1 QK_HA_KUBECONFIG=$QK_STATE/kubeconfig QK_HA_LB=$(lb_name) QK_HA_REQUIRED=true \
		QK_HA_ROUNDS=${QK_HA_ROUNDS:-1} go test -count=1 -v -timeout 30m -run "${QK_HA_RUN:-.}" ./test/ha/)
}
