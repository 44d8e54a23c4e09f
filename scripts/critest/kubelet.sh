#!/usr/bin/env bash
# kubelet.sh — a real kubelet (v1.36.3, standalone: no API server) runs a static pod on
# `quantykube runtime`: both containers reach Running, the log is in CRI format, exec
# works, kill -9 of the runtime restarts no container, removing the manifest removes the
# pod, and nothing is left behind. Prints "kubelet test: PASS" or fails.
# The kubelet uses its own cgroup root (/qkcrit-kubelet), root dir and pod log dir under
# $QK_CACHE/critest, and ports 10350/10351 on 127.0.0.1; all are removed at the end.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
fail() { echo "kubelet test: FAIL: $*" >&2; exit 1; }
KROOT=$WORK/kubelet
CGROOT=qkcrit-kubelet
KUBELET_PID=
kubelet_cleanup() {
  set +e
  [[ -n $KUBELET_PID ]] && kill "$KUBELET_PID" 2>/dev/null && wait "$KUBELET_PID" 2>/dev/null
  KUBELET_PID=
  qk_cleanup
  grep -E " $KROOT(/| )" /proc/self/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l
  rm -rf "$KROOT"
  for d in /sys/fs/cgroup/*/$CGROOT; do [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null; done
}
trap kubelet_cleanup EXIT
qk_setup
KUBELET=$("$REPO_ROOT/scripts/deps.sh" path kubelet)
: >"$WORK/runtime.log"
qk_start_rt

mkdir -p "$KROOT/manifests" "$KROOT/root" "$KROOT/logs"
for c in /sys/fs/cgroup/*; do [[ -d $c && ! -L $c ]] && mkdir -p "$c/$CGROOT"; done
cat /sys/fs/cgroup/cpuset/cpuset.cpus >/sys/fs/cgroup/cpuset/$CGROOT/cpuset.cpus 2>/dev/null || true
cat /sys/fs/cgroup/cpuset/cpuset.mems >/sys/fs/cgroup/cpuset/$CGROOT/cpuset.mems 2>/dev/null || true
cat >"$KROOT/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: $KROOT/manifests
podLogsDir: $KROOT/logs
containerRuntimeEndpoint: unix://$RUN/rt.sock
imageServiceEndpoint: unix://$RUN/rt.sock
cgroupDriver: cgroupfs
cgroupRoot: /$CGROOT
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
address: 127.0.0.1
port: 10350
readOnlyPort: 0
healthzPort: 10351
healthzBindAddress: 127.0.0.1
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
enforceNodeAllocatable: []
localStorageCapacityIsolation: false
makeIPTablesUtilChains: false
syncFrequency: 5s
fileCheckFrequency: 2s
YAML
"$KUBELET" --config "$KROOT/config.yaml" --root-dir "$KROOT/root" --hostname-override qkcrit --v=2 >"$WORK/kubelet.log" 2>&1 &
KUBELET_PID=$!
cat >"$KROOT/web.yaml.tmp" <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: web
    image: registry.k8s.io/e2e-test-images/nginx:1.14-2
  - name: ticker
    image: registry.k8s.io/e2e-test-images/busybox:1.29-2
    command: ["sh", "-c", "trap 'exit 0' TERM; i=0; while true; do echo tick $i; i=$((i+1)); sleep 1; done"]
YAML
mv "$KROOT/web.yaml.tmp" "$KROOT/manifests/web.yaml"

running() { $CRI ps --state Running -q 2>/dev/null | wc -l; }
log "waiting for the static pod's two containers"
for _ in $(seq 120); do (($(running) == 2)) && break; kill -0 $KUBELET_PID || fail "kubelet exited: see $WORK/kubelet.log"; sleep 1; done
(($(running) == 2)) || fail "static pod not Running after 120 s (see $WORK/kubelet.log)"
before=$($CRI ps -q | sort | tr '\n' ' ')
TICKER=$($CRI ps -q --name ticker)
sleep 2
grep -qE '^[0-9T:.-]+Z stdout F tick [0-9]+$' "$KROOT"/logs/default_web-qkcrit_*/ticker/0.log || fail "ticker log not in CRI format"
$CRI exec "$TICKER" wget -qO- http://127.0.0.1:80/ | grep -q nginx || fail "exec wget to the pod's web server"

log "kill -9 the runtime for 10 s"
kill -9 "$RT_PID"; wait "$RT_PID" 2>/dev/null || true; RT_PID=
sleep 10
qk_start_rt
sleep 15
after=$($CRI ps -q | sort | tr '\n' ' ')
[[ $before == "$after" ]] || fail "containers changed across the runtime restart: [$before] -> [$after]"
(($(running) == 2)) || fail "containers not Running after the runtime restart"

log "remove the manifest"
rm "$KROOT/manifests/web.yaml"
for _ in $(seq 150); do [[ -z $($CRI pods -q 2>/dev/null) ]] && break; sleep 1; done
[[ -z $($CRI pods -q 2>/dev/null) ]] || fail "kubelet did not remove the sandbox within 150 s"
mapfile -t leaks < <(qk_leaks)
((${#leaks[@]} == 0)) || fail "left behind: ${leaks[*]}"
echo "kubelet test: PASS (static pod ran, logs/exec worked, containers [$before] survived kill -9 of the runtime, nothing left behind)"
