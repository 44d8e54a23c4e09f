# shellcheck shell=bash
# e2e.sh: the operator end to end on the running cluster, as a user drives
# it: label the worker, install the release of the working tree as a person
# installs a release (scripts/release.sh into $QK_STATE/dist, its OCI archive
# pushed to the cluster's registry, its quantykube.yaml applied: the image
# pinned by digest, pulled by every node from the registry as from ghcr.io),
# watch the Installation reach Moved, patch spec.undo, watch it reach Undone
# (test/e2e, Go with client-go). `e2e` also kills the operator pod once at every step and
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
	e2e_release
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
		QK_E2E_MANIFEST=$QK_STATE/dist/quantykube.yaml \
		QK_E2E_REQUIRED=true QK_E2E_DEMO=${QK_E2E_DEMO:-false} QK_CLUSTER=$QK_CLUSTER QK_STATE=$QK_STATE QK_CACHE=$QK_CACHE \
		go_test test/e2e 90m "${QK_E2E_RUN:-TestOperator}"
}

# e2e_ha CP W: the e2e of a cluster with a load balancer (see above).
e2e_ha() {
	log "e2e: the operator moves the store of every control plane and back, the API in use through $(lb_name) (go test ./test/e2e)"
	export QK_CLUSTER QK_BRIDGE QK_NODE_NET QK_POD_NET QK_CHAIN QK_STATE QK_CACHE
	QK_E2E_KUBECONFIG=$QK_STATE/kubeconfig QK_E2E_WORKER=$2 QK_E2E_CP=$1 QK_E2E_LB=$(lb_name) \
		QK_E2E_MANIFEST=$QK_STATE/dist/quantykube.yaml \
		QK_E2E_REQUIRED=true QK_E2E_DEMO=${QK_E2E_DEMO:-false} \
		go_test test/e2e 60m "${QK_E2E_RUN:-TestOperatorHA}"
}

# e2e_release: the release of the working tree, installed as a person
# installs one. scripts/release.sh writes it into $QK_STATE/dist (a slot's
# own: two clusters' e2e never share it; --allow-dirty: an edited tree is
# released as <commit>-dirty, a clean one is the commit's release, byte for
# byte), and `registry -push` pushes its OCI archive to the cluster's
# registry, ghcr.io's mirror on every node; the test then applies
# dist/quantykube.yaml, whose image is pinned by digest, so each node pulls
# exactly that image from the registry. Nothing is imported into a node.
e2e_release() {
	local dist=$QK_STATE/dist tools=$QK_CACHE/kubeadm/tools pinned
	pinned=$("$QK_ROOT/scripts/release.sh" --allow-dirty --out "$dist") || die "scripts/release.sh failed (see above)"
	# a binary of its own (the running registry's may be older), renamed into place: a slot may be running it
	artifacts_lock
	(cd "$QK_ROOT" && CGO_ENABLED=0 go build -o "$tools/registry-push.tmp" ./scripts/kubeadm/registry) &&
		mv -f "$tools/registry-push.tmp" "$tools/registry-push" || die "building scripts/kubeadm/registry failed (see above)"
	artifacts_unlock
	"$tools/registry-push" -push -addr "$(registry_addr)" "$dist/quantykube.oci.tar" ||
		die "pushing $dist/quantykube.oci.tar to the registry on $(registry_addr) failed; see $QK_STATE/registry.log"
	log "e2e: installing the release $pinned ($dist: pushed to the registry on $(registry_addr), quantykube.yaml applied by the test)"
}

cmd_demo() {
	if [[ ! -f $QK_STATE/kubeconfig ]]; then
		log "demo: a kubeadm cluster first (a control plane and one worker, systemd-nspawn nodes on this machine)"
		QK_WORKERS=1 cmd_up
	fi
	cat >&2 <<EOF2

QuantyKube demo: what a user types, run against the cluster above.
  kubectl label node $QK_CLUSTER-w1 install.quantyroot.io/runtime=quantykube
  scripts/release.sh && kubectl apply -f dist/quantykube.yaml   # its image pushed to the registry first
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
