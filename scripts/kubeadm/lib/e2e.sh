# shellcheck shell=bash
# e2e.sh: the operator end to end on the running cluster, as a user drives
# it: label the worker, apply deploy/quantykube.yaml (with the image `up`
# built, refreshed here from the working tree), watch the Installation reach
# Moved, patch spec.undo, watch it reach Undone (test/e2e, Go with
# client-go). `e2e` also kills the operator pod once at every step and
# injects a failure into the worker's move; `demo` is the clean run, from
# nothing: it brings a cluster up first and leaves it running.
#
# QK_E2E_OBJECTS (default 5000) objects are loaded first unless the cluster
# already holds them.
#
# On a cluster with three control planes (`up --control-planes 3 --workers
# 1`, or `up --lb --workers 1` then `grow --control-planes 3`; a load
# balancer in front) the default test is TestOperatorHA instead: the store's
# HA move and its undo with a Prober, a writer and watchers on the load
# balancer and the store's leader killed mid-way (QK_E2E_RUN selects others).
# The test also gets the load balancer's name and the cluster's parameters
# for `scripts/kubeadm.sh exec`. The count of control planes chooses, not the
# load balancer: one control plane behind one (`up --lb`) runs TestOperator.

QK_E2E_OBJECTS=${QK_E2E_OBJECTS:-5000}

cmd_e2e() {
	[[ -f $QK_STATE/kubeconfig ]] || die "no cluster: run 'scripts/kubeadm.sh up --workers 1' first"
	local cp=$QK_CLUSTER-cp1 w=$QK_CLUSTER-w1 n
	[[ -d $(node_dir "$cp") ]] || die "no control-plane node $cp in $QK_STATE"
	[[ -d $(node_dir "$w") ]] || die "no worker $w in $QK_STATE: run 'scripts/kubeadm.sh up --workers 1'"
	e2e_refresh_image
	n=$(kubectl_qk get configmaps,secrets -A -l quantykube.io/harness=load --no-headers 2>/dev/null | wc -l)
	if ((n < QK_E2E_OBJECTS)); then
		log "e2e: loading $QK_E2E_OBJECTS objects (the cluster holds $n)"
		cmd_load "$QK_E2E_OBJECTS"
	fi
	if (($(state_control_planes | wc -l) > 1)); then
		e2e_ha "$cp" "$w"
		return
	fi
	log "e2e: the operator moves the store and $w, then moves them back (go test ./test/e2e)"
	QK_E2E_KUBECONFIG=$QK_STATE/kubeconfig QK_E2E_WORKER=$w QK_E2E_CP=$cp \
		QK_E2E_MANIFEST=$QK_ROOT/deploy/quantykube.yaml \
		QK_E2E_REQUIRED=true QK_E2E_DEMO=${QK_E2E_DEMO:-false} QK_CLUSTER=$QK_CLUSTER QK_STATE=$QK_STATE QK_CACHE=$QK_CACHE \
		go_test test/e2e 90m "${QK_E2E_RUN:-TestOperator}"
}

# e2e_ha CP W: the e2e of a cluster with a load balancer (see above).
e2e_ha() {
	log "e2e: the operator moves the store of every control plane and back, the API in use through $(lb_name) (go test ./test/e2e)"
	export QK_CLUSTER QK_BRIDGE QK_NODE_NET QK_POD_NET QK_CHAIN QK_STATE QK_CACHE
	QK_E2E_KUBECONFIG=$QK_STATE/kubeconfig QK_E2E_WORKER=$2 QK_E2E_CP=$1 QK_E2E_LB=$(lb_name) \
		QK_E2E_MANIFEST=$QK_ROOT/deploy/quantykube.yaml \
		QK_E2E_REQUIRED=true QK_E2E_DEMO=${QK_E2E_DEMO:-false} \
		go_test test/e2e 60m "${QK_E2E_RUN:-TestOperatorHA}"
}

# e2e_refresh_image rebuilds the quantykube image from the working tree and
# puts it where the cluster finds it: every node's containerd and the
# cluster's registry. (No-op when unchanged: images are cached by content.)
e2e_refresh_image() {
	local tools=$QK_CACHE/kubeadm/tools before after n
	# make_image hard-links the cached tarball: a new build is a new inode
	before=$(stat -c %i "$QK_STATE/images/quantykube.tar" 2>/dev/null || true)
	artifacts_lock
	build_quantykube "$tools/quantykube" || die "go build ./cmd/quantykube failed"
	make_quantykube_image || die "scripts/image.sh failed (see above)"
	artifacts_unlock
	after=$(stat -c %i "$QK_STATE/images/quantykube.tar")
	[[ $before == "$after" ]] && return 0
	log "e2e: the working tree changed since 'up': $QK_QUANTYKUBE_IMAGE rebuilt, loaded into every node and the registry"
	for n in $(state_nodes); do
		is_lb "$n" && continue
		node_exec "$n" ctr -n k8s.io images import /opt/quantykube/images/quantykube.tar >/dev/null || die "importing quantykube.tar into $n failed"
	done
	registry_down
	registry_up
}

cmd_demo() {
	if [[ ! -f $QK_STATE/kubeconfig ]]; then
		log "demo: a kubeadm cluster first (a control plane and one worker, systemd-nspawn nodes on this machine)"
		QK_WORKERS=1 cmd_up
	fi
	cat >&2 <<EOF2

QuantyKube demo: what a user types, run against the cluster above.
  kubectl label node $QK_CLUSTER-w1 install.quantyroot.io/runtime=quantykube
  kubectl apply -f deploy/quantykube.yaml
  kubectl get installation quantykube -w                     # the lines below
  kubectl patch installation quantykube --type merge -p '{"spec":{"undo":true}}'
$QK_E2E_OBJECTS objects are loaded first; every resourceVersion is compared after each move.

EOF2
	QK_E2E_DEMO=true cmd_e2e 2>&1 | sed -n -e 's/^ *[a-z_]*_test.go:[0-9]*: //p' -e '/^--- \|^ok \|^FAIL\|^PASS/p' -e '/kubeadm.sh/p'
	local rc=${PIPESTATUS[0]}
	if ((rc == 0)); then
		cat >&2 <<EOF2

Done: the store and $QK_CLUSTER-w1 moved onto QuantyKube and back, nothing lost.
The cluster stays up: export KUBECONFIG=$QK_STATE/kubeconfig; kubectl get installation quantykube -o yaml
Remove it: scripts/kubeadm.sh down
EOF2
	fi
	return "$rc"
}
