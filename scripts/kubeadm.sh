#!/usr/bin/env bash
# kubeadm.sh: real kubeadm clusters on this machine, kind-style. Each node is a
# `systemd-nspawn -b` container with systemd as PID 1, booted from one shared
# root-filesystem template through an overlay, with its own address on a
# private host bridge; containerd and kubelet run inside as systemd units.
#
#   scripts/kubeadm.sh up [--control-planes N] [--workers N] [--lb]
#                                         build what is missing (cached), boot, kubeadm init/join, wait Ready;
#                                         N control planes (1, or odd: 3) with stacked etcd; more than one
#                                         puts HAProxy in front of them on node QK_CLUSTER-lb (kubeadm's HA guide);
#                                         --lb (QK_LB=1) puts it in front of one control plane too (its
#                                         controlPlaneEndpoint, so it can grow); without it, one has no LB
#   scripts/kubeadm.sh grow --control-planes N
#                                         a cluster made with --lb (or grown) joins control planes until it
#                                         has N (odd, more than now), one at a time, each behind the LB once
#                                         joined; a killed grow is completed by the same grow run again
#   scripts/kubeadm.sh down               remove everything up made (idempotent, safe after a crash)
#   scripts/kubeadm.sh exec NODE CMD...   run CMD as root in all of NODE's namespaces
#   scripts/kubeadm.sh smoke              kubectl get nodes, a pod on each node, exec and logs
#   scripts/kubeadm.sh load N             N objects (ConfigMaps, Secrets, namespaces) + Deployments on every node
#   scripts/kubeadm.sh selftest [MODE]    snapshot the host, up, smoke, down, compare the host with the snapshot
#                                         (MODE: test/kubeadm/down_test.sh's, e.g. crash, twice, grow, crash-grow)
#   scripts/kubeadm.sh build              only build binaries, images and the node template (cached);
#                                         with QK_CONTROL_PLANES=3 the load balancer's template too
#   scripts/kubeadm.sh prereqs            only install the host packages up and build need (apt)
#   scripts/kubeadm.sh templates          only build the node template (and the LB's with QK_CONTROL_PLANES=3)
#   scripts/kubeadm.sh status             nodes of the running cluster (the load balancer and its view of the
#                                         API servers too) and how to reach it
#   scripts/kubeadm.sh free-slot          `export ...` lines of the lowest free slot (QK_SLOT=0..7)
#   scripts/kubeadm.sh move               the datastore moved onto quantykube store and back, with faults (test/move)
#   scripts/kubeadm.sh node               a node's runtime moved onto quantykube runtime and back, with faults (test/noderuntime)
#   scripts/kubeadm.sh e2e                the operator moves the store and a worker and back, killed at every
#                                         step; then a worker that cannot finish (test/e2e; needs up --workers 1);
#                                         on 3 control planes (up --control-planes 3, or grown): the store's HA
#                                         move and undo with the API in use through the load balancer, its leader
#                                         killed (TestOperatorHA); the count of control planes chooses, not the LB
#   scripts/kubeadm.sh demo               up (if no cluster), then the operator's move and undo, readable
#   scripts/kubeadm.sh ha                 API availability through the load balancer while each API server
#                                         restarts in turn (test/ha; needs 3 control planes)
#
# Parameters are environment variables (see scripts/kubeadm/lib/common.sh):
# QK_CLUSTER, QK_BRIDGE, QK_NODE_NET, QK_POD_NET, QK_CONTROL_PLANES, QK_WORKERS, QK_LB,
# QK_CACHE, QK_STATE, ...; QK_SLOT=0..7 sets the five names of a cluster slot at once.
# Design and pitfalls: scripts/kubeadm/README.md.
set -euo pipefail

lib=$(cd "$(dirname "${BASH_SOURCE[0]}")/kubeadm/lib" && pwd)
for f in common host net registry template lb node artifacts cluster grow down smoke load e2e selftest move noderuntime ha; do
	# shellcheck source=/dev/null
	source "$lib/$f.sh"
done

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }

main() {
	local cmd=${1:-}
	[[ $# -gt 0 ]] && shift
	case $cmd in
	up)
		while [[ $# -gt 0 ]]; do
			case $1 in
			--workers) [[ ${2:-} =~ ^[0-9]+$ ]] || die "--workers needs a number, e.g. --workers 1"; QK_WORKERS=$2; shift 2 ;;
			--workers=*) QK_WORKERS=${1#*=}; [[ $QK_WORKERS =~ ^[0-9]+$ ]] || die "--workers needs a number, e.g. --workers=1"; shift ;;
			--control-planes) [[ ${2:-} =~ ^[0-9]+$ ]] || die "--control-planes needs a number, e.g. --control-planes 3"; check_control_planes "$2"; QK_CONTROL_PLANES=$2; shift 2 ;;
			--control-planes=*) QK_CONTROL_PLANES=${1#*=}; [[ $QK_CONTROL_PLANES =~ ^[0-9]+$ ]] || die "--control-planes needs a number, e.g. --control-planes=3"; check_control_planes "$QK_CONTROL_PLANES"; shift ;;
			--lb) QK_LB=1; shift ;; # read by lb_wanted (lb.sh)
			*) die "up: unknown argument '$1'; usage: scripts/kubeadm.sh up [--control-planes N] [--workers N] [--lb]" ;;
			esac
		done
		cmd_up ;;
	grow)
		local want=""
		while [[ $# -gt 0 ]]; do
			case $1 in
			--control-planes) want=${2:-}; shift $(($# > 1 ? 2 : 1)) ;;
			--control-planes=*) want=${1#*=}; shift ;;
			*) die "grow: unknown argument '$1'; usage: scripts/kubeadm.sh grow --control-planes N" ;;
			esac
		done
		[[ $want =~ ^[0-9]+$ ]] || die "grow needs the count to reach, e.g. scripts/kubeadm.sh grow --control-planes 3"
		cmd_grow "$want" ;;
	down) [[ $# -eq 0 ]] || die "down takes no arguments"; cmd_down ;;
	exec)
		[[ $# -ge 2 ]] || die "usage: scripts/kubeadm.sh exec NODE CMD... (nodes: $(state_nodes | tr '\n' ' '))"
		[[ -d $(node_dir "$1") ]] || die "no node '$1'; nodes: $(state_nodes | tr '\n' ' ')"
		node_exec "$@" ;;
	smoke) cmd_smoke ;;
	load)
		[[ ${1:-} =~ ^[0-9]+$ ]] || die "usage: scripts/kubeadm.sh load N (N objects, e.g. load 500)"
		cmd_load "$1" ;;
	selftest) cmd_selftest "$@" ;;
	build)
		# a scratch state dir: a running cluster's images/ must not be replaced under it
		require_host; install_prereqs
		QK_STATE=$(mktemp -d "${TMPDIR:-/tmp}/qk-build.XXXXXX")
		ensure_template
		if lb_wanted; then ensure_lb_template; fi # before the artifacts: they may wait for deps.sh's lock
		ensure_artifacts
		rm -rf "$QK_STATE" ;;
	prereqs) require_host; install_prereqs ;;
	templates)
		# what build does first, without the binaries and images (no deps.sh)
		require_host; install_prereqs; ensure_template
		if lb_wanted; then ensure_lb_template; fi ;;
	status) cmd_status ;;
	free-slot) [[ $# -eq 0 ]] || die "free-slot takes no arguments"; cmd_free_slot ;;
	move) cmd_move ;;
	node) cmd_node ;;
	e2e) cmd_e2e ;;
	demo) cmd_demo ;;
	ha) cmd_ha ;;
	-h | --help | help) usage ;;
	"") usage >&2; exit 2 ;;
	*) die "unknown subcommand '$cmd'; run 'scripts/kubeadm.sh help'" ;;
	esac
}

main "$@"
