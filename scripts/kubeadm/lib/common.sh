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
QK_CACHE=${QK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quantykube}

# slot_vars N prints the five names of slot N (0..7), one `NAME=value` a line:
# QK_CLUSTER, QK_BRIDGE, QK_NODE_NET, QK_CHAIN, QK_STATE. Slot 0 is the
# defaults; slot N>0 is qkN, qkbrN, 172.30.(233+N), QK-KUBEADM-N and
# $QK_CACHE/kubeadm/state-N. Two slots share none of them, so their clusters
# run side by side on one host (the pod and service subnets live only inside
# the nodes and may repeat).
slot_vars() {
	local n=$1
	if ((n == 0)); then
		printf '%s\n' QK_CLUSTER=qk QK_BRIDGE=qkbr0 QK_NODE_NET=172.30.233 QK_CHAIN=QK-KUBEADM "QK_STATE=$QK_CACHE/kubeadm/state"
	else
		printf '%s\n' "QK_CLUSTER=qk$n" "QK_BRIDGE=qkbr$n" "QK_NODE_NET=172.30.$((233 + n))" "QK_CHAIN=QK-KUBEADM-$n" "QK_STATE=$QK_CACHE/kubeadm/state-$n"
	fi
}

# QK_SLOT=N sets all five at once; one of them also set by hand to another
# value is a contradiction, refused rather than half-applied.
if [[ -n ${QK_SLOT:-} ]]; then
	[[ $QK_SLOT =~ ^[0-7]$ ]] || { echo "kubeadm.sh: QK_SLOT=$QK_SLOT: want a slot number 0..7 (scripts/kubeadm.sh free-slot finds a free one)" >&2; exit 1; }
	while IFS='=' read -r qk_var qk_val; do
		if [[ -n ${!qk_var:-} && ${!qk_var} != "$qk_val" ]]; then
			echo "kubeadm.sh: QK_SLOT=$QK_SLOT means $qk_var=$qk_val, but $qk_var=${!qk_var} is set too; unset one of them" >&2
			exit 1
		fi
		printf -v "$qk_var" '%s' "$qk_val"
	done < <(slot_vars "$QK_SLOT")
	unset qk_var qk_val
fi
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
# the image `up` builds (scripts/image.sh) and loads into every node; its registry host is what the
# nodes' mirrors cover. `e2e` installs scripts/release.sh's image instead, pinned by digest (lib/e2e.sh).
QK_QUANTYKUBE_IMAGE=${QK_QUANTYKUBE_IMAGE:-ghcr.io/quantyroot/quantykube:$(sed -n 's/^var Version = "\(v[0-9][^"]*\)"$/\1/p' "$QK_ROOT/internal/version/version.go")}
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

# state_control_planes prints the control-plane nodes recorded in the state dir.
state_control_planes() { state_nodes | grep -E -- "^$QK_CLUSTER-cp[0-9]+\$" || true; }

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

# build_quantykube OUT: ./cmd/quantykube built as the image ships it (static,
# CGO_ENABLED=0, -trimpath), into OUT atomically. Every build of the binary
# in these scripts, and scripts/test.sh's, uses this one configuration: a
# different one (cgo, or paths kept) recompiles every package of the tree,
# minutes on a cold machine.
build_quantykube() {
	(cd "$QK_ROOT" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$1.tmp" ./cmd/quantykube) &&
		mv "$1.tmp" "$1"
}

# cmd_free_slot prints `export ...` lines for the lowest slot whose bridge
# does not exist and whose state dir holds no cluster (no kubeconfig, no
# nodes/), for `eval "$(scripts/kubeadm.sh free-slot)"`. Nothing is reserved:
# two callers at the same instant can get the same slot (the second `up`
# then stops at check_net_free or finds the first's state). QK_SLOT_SKIP
# names slots not to pick (e.g. "0": one a caller took but has not brought
# up yet, so it still looks free).
cmd_free_slot() {
	local n state bridge line
	for n in 0 1 2 3 4 5 6 7; do
		[[ " ${QK_SLOT_SKIP:-} " == *" $n "* ]] && continue
		bridge=$(slot_vars "$n" | sed -n 's/^QK_BRIDGE=//p')
		state=$(slot_vars "$n" | sed -n 's/^QK_STATE=//p')
		ip link show "$bridge" >/dev/null 2>&1 && continue
		[[ -e $state/kubeconfig || -d $state/nodes || -d $state/host ]] && continue
		echo "export QK_SLOT=$n"
		while read -r line; do echo "export $line"; done < <(slot_vars "$n")
		return 0
	done
	die "no free slot: every slot 0..7 has a bridge or a cluster in its state dir (scripts/kubeadm.sh status with QK_SLOT=N shows one)"
}

# go_test DIR TIMEOUT RUN: the tests of ./DIR (test/move, test/e2e, ...) with
# -v and -count=1, run from DIR as go test runs them: the binary
# $QK_TESTBIN/<DIR with _ for />.test when scripts/test.sh compiled every
# test binary of the run once (no step of a cluster waits for a compile),
# else go test itself. Variables set before the call reach the tests.
go_test() {
	local dir=$1 timeout=$2 run=$3 bin=
	[[ -n ${QK_TESTBIN:-} ]] && bin=$QK_TESTBIN/${dir//\//_}.test
	if [[ -n $bin && -x $bin ]]; then
		log "go test ./$dir: the run's compiled $bin"
		(cd "$QK_ROOT/$dir" && "$bin" -test.count=1 -test.v -test.timeout "$timeout" -test.run "$run")
	else
		(cd "$QK_ROOT" && go test -count=1 -v -timeout "$timeout" -run "$run" "./$dir/")
	fi
}
