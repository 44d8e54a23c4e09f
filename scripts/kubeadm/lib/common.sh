# shellcheck shell=bash
# common.sh: parameters, logging and state paths shared by every subcommand.
#
# Every name, subnet and count is a parameter (environment variable, some also
# a flag); nothing below is a constant of the cluster shape.
#
# State layout (QK_STATE, default $QK_CACHE/kubeadm/state):
#   host/        what `up` made on the host and `down` must undo: bridge, chain, registry (pid),
#                cgroups (the qk-CLUSTER levels), registered (its entry in the
#                host-wide registry QK_HOSTREG, see host.sh), template-build
#                (a template being built)
#   nodes/NAME/  one node: upper/ (overlay; nspawn keeps its work dir beside it), containerd/ (bound at
#                /var/lib/containerd), runtime/ (bound at /var/lib/quantykube/runtime: quantykube runtime's
#                layers need a real filesystem, not the node's overlay), pid (nspawn), console.log, ip, podcidr
#   kubeconfig   the host's kubeconfig for the cluster
# `down` reads only this directory and the live system, never the parameters of
# the `up` that made it, so it works after a crash halfway through `up`.

QK_ROOT=${QK_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
QK_CACHE=${QK_CACHE:-$QK_ROOT/.cache}
QK_STATE=${QK_STATE:-$QK_CACHE/kubeadm/state}
QK_CLUSTER=${QK_CLUSTER:-qk}                 # node name prefix
QK_BRIDGE=${QK_BRIDGE:-qkbr0}                # host bridge the nodes sit on
QK_NODE_NET=${QK_NODE_NET:-172.30.233}       # nodes' /24 (first three octets); .1 is the host
QK_POD_NET=${QK_POD_NET:-10.244}             # pods' /16 (first two octets); node k gets .k+1.0/24
QK_SERVICE_SUBNET=${QK_SERVICE_SUBNET:-10.96.0.0/16}
QK_CONTROL_PLANES=${QK_CONTROL_PLANES:-1}
QK_WORKERS=${QK_WORKERS:-1}
QK_CHAIN=${QK_CHAIN:-QK-KUBEADM}             # iptables chain first in FORWARD
QK_K8S_VERSION=${QK_K8S_VERSION:-v1.36.3}
QK_ETCD_VERSION=${QK_ETCD_VERSION:-3.6.16}
QK_PAUSE_TAG=${QK_PAUSE_TAG:-3.10.2}
QK_DEBIAN_SUITE=${QK_DEBIAN_SUITE:-bookworm}
QK_WORKLOAD_IMAGE=${QK_WORKLOAD_IMAGE:-quantykube.local/busybox:1}
QK_QUANTYKUBE_IMAGE=${QK_QUANTYKUBE_IMAGE:-quantykube.local/quantykube:dev}
QK_WAIT=${QK_WAIT:-300}                      # seconds to wait for any one readiness step

QK_SCRIPTS=$QK_ROOT/scripts/kubeadm
QK_START=$(date +%s)

log() { printf '%s [kubeadm.sh +%ss] %s\n' "$(date -u +%H:%M:%S)" "$(($(date +%s) - QK_START))" "$*" >&2; }
die() { printf 'kubeadm.sh: %s\n' "$*" >&2; exit 1; }

# node_names prints every node of the requested shape, control planes first.
node_names() {
	local i
	for ((i = 1; i <= QK_CONTROL_PLANES; i++)); do echo "$QK_CLUSTER-cp$i"; done
	for ((i = 1; i <= QK_WORKERS; i++)); do echo "$QK_CLUSTER-w$i"; done
}

# state_nodes prints the nodes recorded in the state dir (what exists, whatever the parameters say).
state_nodes() {
	[[ -d $QK_STATE/nodes ]] || return 0
	local d
	for d in "$QK_STATE"/nodes/*/; do [[ -d $d ]] && basename "$d"; done
	return 0
}

# wait_for SECONDS WHAT CMD...: retries CMD every second until it succeeds or time runs out.
wait_for() {
	local limit=$1 what=$2 t0=$SECONDS
	shift 2
	until "$@" >/dev/null 2>&1; do
		((SECONDS - t0 < limit)) || { log "timed out after ${limit}s waiting for $what"; return 1; }
		sleep 1
	done
}

# hash_of FILE... prints a short content hash of the files (order-sensitive).
hash_of() { cat "$@" | sha256sum | cut -c1-16; }
