#!/usr/bin/env bash
# bench.sh [quantykube|containerd] [N] — pod start latency and memory of a CRI runtime on
# this node, for docs/benchmarks.md:
# N times (default 10), with the busybox image present, time RunPodSandbox + CreateContainer
# + StartContainer until the container is Running (CNI network, crictl as the client), then
# report min/median/max, the runtime daemon's RSS with N pods running, and the per-container
# helper's (monitor or shim) RSS and private memory.
# containerd is Debian's 1.6 package, unpacked under the cache (not installed), configured
# like the notes say (restrict_oom_score_adj, cgroupfs, mirrors to the stand-in registry).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
WHICH=${1:-quantykube}
N=${2:-10}
CTRD_PID=
bench_cleanup() {
  set +e
  if [[ -n $CTRD_PID ]]; then
    $CRI rmp -fa >/dev/null 2>&1
    kill "$CTRD_PID"; wait "$CTRD_PID" 2>/dev/null
    kill_our_shims
    grep -E " $WORK/containerd-root/" /proc/self/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l
    rm -rf "$WORK/containerd-root"
    # containerd puts pods without a cgroup parent under /k8s.io: remove it if we made it.
    [[ $K8SIO_EXISTED == 1 ]] || for d in /sys/fs/cgroup/*/k8s.io; do [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null; done
  fi
  qk_cleanup
}
# Shims of our containerd only: their -namespace k8s.io -address points into $RUN.
kill_our_shims() { for p in $(pgrep -f -- "-address $RUN/containerd.sock"); do kill "$p" 2>/dev/null; done; }
trap bench_cleanup EXIT
qk_setup

K8SIO_EXISTED=0
[[ -d /sys/fs/cgroup/cpu/k8s.io ]] && K8SIO_EXISTED=1
if [[ $WHICH == containerd ]]; then
  CT=$WORK/containerd-pkg
  if [[ ! -x $CT/usr/bin/containerd ]]; then
    log "fetching Debian containerd (unpacked, not installed)"
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download containerd >/dev/null 2>&1) || { apt-get update -qq; (cd "$tmp" && apt-get download containerd >/dev/null); }
    rm -rf "$CT"; dpkg-deb -x "$tmp"/containerd_*.deb "$CT"; rm -rf "$tmp"
  fi
  mkdir -p "$RUN/certs.d" "$WORK/containerd-root"
  for h in registry.k8s.io gcr.io k8s.gcr.io docker.io quay.io; do
    mkdir -p "$RUN/certs.d/$h"
    printf 'server = "https://%s"\n[host."http://127.0.0.1:%s"]\n  capabilities = ["pull", "resolve"]\n' "$h" "$PORT" >"$RUN/certs.d/$h/hosts.toml"
  done
  cat >"$RUN/containerd.toml" <<TOML
version = 2
root = "$WORK/containerd-root"
state = "$RUN/containerd-state"
[grpc]
  address = "$RUN/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10.2"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
      BinaryName = "$RUNC"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNIBIN"
    conf_dir = "$RUN/cni"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$RUN/certs.d"
TOML
  PATH=$CT/usr/bin:$PATH "$CT/usr/bin/containerd" --config "$RUN/containerd.toml" >"$WORK/containerd.log" 2>&1 &
  CTRD_PID=$!
  DAEMON_PID=$CTRD_PID
  CRI="$CRICTL -r unix://$RUN/containerd.sock -i unix://$RUN/containerd.sock"
  for _ in $(seq 100); do [[ -S $RUN/containerd.sock ]] && break; sleep 0.1; done
  sleep 1
  helper() { pgrep -f -- "-address $RUN/containerd.sock" | head -1; }
else
  : >"$WORK/runtime.log"
  qk_start_rt
  DAEMON_PID=$RT_PID
  helper() { pgrep -f -- "--dir $RUN/state/containers/" | head -1; }
fi

T=$(mktemp -d)
$CRI pull registry.k8s.io/e2e-test-images/busybox:1.29-2 >/dev/null
$CRI pull registry.k8s.io/pause:3.10.2 >/dev/null
cat >"$T/ctr.json" <<'JSON'
{"metadata":{"name":"sleeper"},"image":{"image":"registry.k8s.io/e2e-test-images/busybox:1.29-2"},"command":["sleep","3600"]}
JSON
ms=()
for i in $(seq "$N"); do
  printf '{"metadata":{"name":"bench-%d","namespace":"qk","uid":"bench-%d"}}' "$i" "$i" >"$T/pod.json"
  t0=$(date +%s%N)
  POD=$($CRI runp "$T/pod.json")
  CID=$($CRI create "$POD" "$T/ctr.json" "$T/pod.json")
  $CRI start "$CID" >/dev/null
  until $CRI ps --id "$CID" --state Running -q | grep -q .; do sleep 0.01; done
  t1=$(date +%s%N)
  ms+=($(( (t1 - t0) / 1000000 )))
done
sorted=($(printf '%s\n' "${ms[@]}" | sort -n))
kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/smaps_rollup"; }
h=$(helper)
echo "$WHICH: pod start (runp+create+start until Running, busybox present, n=$N): min ${sorted[0]} ms, median ${sorted[$((N/2))]} ms, max ${sorted[$((N-1))]} ms"
echo "$WHICH: daemon RSS with $N pods $(kb "$DAEMON_PID" Rss) KiB (private $(kb "$DAEMON_PID" Private_Dirty) KiB); per-container helper RSS $(kb "$h" Rss) KiB (private $(kb "$h" Private_Dirty) KiB)"
rm -rf "$T"
