# shellcheck shell=bash
# noderuntime.sh: `node` moves nodes of the running cluster from containerd
# onto 'quantykube runtime' and back, through the same host commands a person
# runs (quantykube install|undo runtime), and checks what the install-runtime
# issue promises: test/noderuntime (Go tests with client-go) drains the
# worker, installs, uncordons, runs a Deployment and a DaemonSet there with
# exec, logs and port-forward, undoes; then the control-plane node with its
# static pods; then a failure and a kill -9 at every step on the worker; then
# bad input; the pods' restart time with and without the prepull; and the
# control-plane node moved while its API server runs on quantykube store.
#
# QK_NODE_RUN selects tests (default: all of test/noderuntime). QK_NR_MEASURE=1
# makes TestPodRestartPrepull take three rounds of each case and measure the
# control-plane node too (~10 min; the figures of docs/benchmarks.md). A
# cluster with at least one worker must be up (scripts/kubeadm.sh up --workers 1).

cmd_node() {
	[[ -f $QK_STATE/kubeconfig ]] || die "no cluster: run 'scripts/kubeadm.sh up --workers 1' first"
	local cp=$QK_CLUSTER-cp1 w=$QK_CLUSTER-w1 bin=$QK_STATE/quantykube etcdctl
	[[ -d $(node_dir "$cp") ]] || die "no control-plane node $cp in $QK_STATE"
	[[ -d $(node_dir "$w") ]] || die "no worker $w in $QK_STATE: run 'scripts/kubeadm.sh up --workers 1'"
	build_quantykube "$bin" || die "go build ./cmd/quantykube failed"
	# TestControlPlaneWithStoreMoved probes quantykube store with etcdctl.
	etcdctl=$(QK_CACHE=$QK_CACHE "$QK_ROOT/scripts/deps.sh" path etcdctl) || die "scripts/deps.sh path etcdctl failed"
	log "node: install runtime and undo runtime on $w and $cp, faults at every step, bad input, restart times with and without the prepull, $cp with its API server on quantykube store (go test ./test/noderuntime)"
	# The test reaches the nodes through scripts/kubeadm.sh exec: it needs this cluster's parameters.
	export QK_CLUSTER QK_BRIDGE QK_NODE_NET QK_POD_NET QK_CHAIN QK_STATE QK_CACHE
	QK_NR_KUBECONFIG=$QK_STATE/kubeconfig QK_NR_WORKER=$w QK_NR_CP=$cp QK_NR_REQUIRED=true \
		QK_NR_BIN=$bin QK_ETCDCTL=$etcdctl QK_NR_MEASURE=${QK_NR_MEASURE:-} QK_WORKLOAD_IMAGE=$QK_WORKLOAD_IMAGE \
		go_test test/noderuntime 60m "${QK_NODE_RUN:-.}"
}
