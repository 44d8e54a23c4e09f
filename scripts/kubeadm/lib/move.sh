# shellcheck shell=bash
# move.sh: `move` moves the running cluster's datastore from etcd onto
# 'quantykube store' and back, on the first control-plane node, through the
# same host commands a person runs (quantykube install|undo store), and checks
# what the install-store issue promises: test/move (Go tests with client-go)
# loads objects, watches from a pre-move resourceVersion, compares every
# resourceVersion and etcd's hash, schedules pods afterwards, then injects a
# failure and a kill -9 into every step of install and undo.
#
# QK_MOVE_OBJECTS (default 5000) objects are loaded; QK_MOVE_RUN selects tests
# (default: all of test/move). A cluster must be up (scripts/kubeadm.sh up).

cmd_move() {
	[[ -f $QK_STATE/kubeconfig ]] || die "no cluster: run 'scripts/kubeadm.sh up' first"
	local cp=$QK_CLUSTER-cp1 bin=$QK_STATE/quantykube etcdctl
	[[ -d $(node_dir "$cp") ]] || die "no control-plane node $cp in $QK_STATE"
	build_quantykube "$bin" || die "go build ./cmd/quantykube failed"
	local bench
	etcdctl=$(QK_CACHE=$QK_CACHE "$QK_ROOT/scripts/deps.sh" path etcdctl) || die "scripts/deps.sh path etcdctl failed"
	bench=$(QK_CACHE=$QK_CACHE "$QK_ROOT/scripts/deps.sh" path etcd-benchmark) || die "scripts/deps.sh path etcd-benchmark failed"
	log "move: install store and undo store on $cp, then faults at every step (go test ./test/move)"
	QK_MOVE_KUBECONFIG=$QK_STATE/kubeconfig QK_MOVE_NODE=$cp QK_MOVE_REQUIRED=true \
		QK_ETCDCTL=$etcdctl QK_ETCD_BENCHMARK=$bench QK_STORE_BIN=$bin QK_WORKLOAD_IMAGE=$QK_WORKLOAD_IMAGE \
		go_test test/move 90m "${QK_MOVE_RUN:-.}"
}
