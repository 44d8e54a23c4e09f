#!/usr/bin/env bash
# down_test.sh [plain|ha|crash|crash-ha|twice|grow|crash-grow]: `down` leaves the host as it found it.
#
#   plain (default)  snapshot the host; up; smoke; down; snapshot; compare
#   ha               the same with up --control-planes 3 --workers 1 (a load
#                    balancer node, three control planes; QK_HA_TEST=1 runs
#                    `scripts/kubeadm.sh ha` between smoke and down)
#   crash            snapshot; start up, kill -9 it (its whole process group)
#                    once a node has booted; down; snapshot; compare
#   twice            snapshot; up; up again; smoke; down; snapshot; compare
#   crash-ha         snapshot; start up --control-planes 3 --workers 1, kill -9
#                    it once its nodes booted; up again over the remains (it
#                    must complete); smoke; the operator's HA e2e
#                    (scripts/kubeadm.sh e2e: TestOperatorHA); down; snapshot;
#                    compare. crash's check and an HA cluster's in one up/down.
#   grow             snapshot; up --lb --workers 1 (one control plane behind
#                    the LB); smoke; grow --control-planes 3; smoke; down;
#                    snapshot; compare (QK_HA_TEST=1 runs `ha` after the grow)
#   crash-grow       snapshot; up --lb --workers 1; grow --control-planes 3
#                    killed with kill -9 after its first join (QK_CRASH_AT,
#                    default 'joined'); grow again (it must complete); smoke;
#                    down; snapshot; compare
#
# The kill -9 of crash modes is test/kubeadm/crash.sh's (QK_CRASH_DELAY).
# A snapshot (test/kubeadm/snapshot.sh) covers iptables, links, addresses,
# routes, mounts, network namespaces, sysctls, cgroup trees and node
# processes. Run it on a host where nothing else changes those meanwhile.
# Prints "selftest: N passed, N failed" last; exits non-zero on any failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
kubeadm_sh=$root/scripts/kubeadm.sh
mode=${1:-plain}
tmp=$(mktemp -d /tmp/qk-selftest.XXXXXX)
pass=0 fail=0
step() { # step WHAT CMD...
	local what=$1 t0=$SECONDS
	shift
	echo "== $what"
	if "$@"; then pass=$((pass + 1)); echo "ok   $what ($((SECONDS - t0))s)"; else fail=$((fail + 1)); echo "FAIL $what ($((SECONDS - t0))s)"; fi
}

# A leftover cluster would make the "before" snapshot wrong.
"$kubeadm_sh" down || true
"$here/snapshot.sh" "$tmp/before"

case $mode in
plain)
	step "up" "$kubeadm_sh" up
	step "smoke" "$kubeadm_sh" smoke
	;;
ha)
	step "up --control-planes 3 --workers 1" "$kubeadm_sh" up --control-planes 3 --workers 1
	step "smoke" "$kubeadm_sh" smoke
	if [[ ${QK_HA_TEST:-} == 1 ]]; then step "ha (API servers restarted one at a time)" "$kubeadm_sh" ha; fi
	;;
twice)
	step "up" "$kubeadm_sh" up
	step "up again over a running cluster" "$kubeadm_sh" up
	step "smoke" "$kubeadm_sh" smoke
	;;
crash | crash-ha)
	up_args=()
	[[ $mode == crash-ha ]] && up_args=(--control-planes 3 --workers 1)
	step "up was killed with nodes running" "$here/crash.sh" up "${up_args[@]}"
	if [[ $mode == crash-ha ]]; then
		step "up ${up_args[*]} again over the remains of the killed one" "$kubeadm_sh" up "${up_args[@]}"
		step "smoke" "$kubeadm_sh" smoke
		step "e2e: the operator's HA move and undo (TestOperatorHA)" "$kubeadm_sh" e2e
	fi
	;;
grow)
	step "up --lb --workers 1" "$kubeadm_sh" up --lb --workers 1
	step "smoke (one control plane behind the LB)" "$kubeadm_sh" smoke
	step "grow --control-planes 3" "$kubeadm_sh" grow --control-planes 3
	step "smoke (three control planes)" "$kubeadm_sh" smoke
	if [[ ${QK_HA_TEST:-} == 1 ]]; then step "ha (API servers restarted one at a time)" "$kubeadm_sh" ha; fi
	;;
crash-grow)
	step "up --lb --workers 1" "$kubeadm_sh" up --lb --workers 1
	step "grow was killed after its first join" env QK_CRASH_AT="${QK_CRASH_AT:-joined}" "$here/crash.sh" grow --control-planes 3
	step "grow --control-planes 3 again over the killed one" "$kubeadm_sh" grow --control-planes 3
	step "smoke (three control planes)" "$kubeadm_sh" smoke
	;;
*) echo "usage: test/kubeadm/down_test.sh [plain|ha|crash|crash-ha|twice|grow|crash-grow]" >&2; exit 2 ;;
esac

step "down" "$kubeadm_sh" down
step "down again (idempotent)" "$kubeadm_sh" down
"$here/snapshot.sh" "$tmp/after"
step "host matches its snapshot" "$here/compare.sh" "$tmp/before" "$tmp/after"
echo "selftest ($mode): $pass passed, $fail failed"
rm -rf "$tmp"
((fail == 0))
