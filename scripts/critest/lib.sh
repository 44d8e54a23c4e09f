# lib.sh — shared harness of scripts/critest.sh and scripts/critest/bench.sh (sourced); test/runtime
# (restart.sh, kubelet.sh) does the same steps in Go (test/runtime/env_test.go, host_test.go).
#
# qk_setup        build tools and stand-ins, start the stand-in registry, write the runtime config
# qk_start_rt     start `quantykube runtime` in the background (RT_PID) and wait for its socket
# qk_leaks        print what pods left behind (empty output = nothing)
# qk_cleanup      remove pods, stop runtime and registry, remove bridge, mounts, cgroups, state;
#                 put net.ipv4.ip_forward back as qk_setup found it
# Variables after qk_setup: CRICTL RUNC CNIBIN CRITEST QK RUN WORK (and CRI, a crictl command line).
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${QK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quantykube}
WORK=$CACHE/critest
PORT=${QK_CRITEST_PORT:-5099}
RUN=${QK_CRITEST_RUN:-/run/qkcritest}
BRIDGE=qkcrit0
SUBNET=10.231.77.0/24
REG_PID= RT_PID=
export CRI_CONFIG_FILE=/dev/null
log() { printf '[%s %s] %s\n' "$(basename "$0")" "$(date -u +%H:%M:%S)" "$*" >&2; }

qk_setup() {
  mkdir -p "$WORK"
  log "building critest, crictl, runc, CNI plugins (cached)"
  mapfile -t P < <("$REPO_ROOT/scripts/deps.sh" path critest crictl runc cni-plugins)
  CRITEST=${P[0]} CRICTL=${P[1]} RUNC=${P[2]} CNIBIN=${P[3]}
  CRI="$CRICTL -r unix://$RUN/rt.sock -i unix://$RUN/rt.sock"
  log "preparing stand-in images"
  "$REPO_ROOT/scripts/critest/standins.sh" "$WORK/standins"
  (cd "$REPO_ROOT" && go build -o "$WORK/registry" ./scripts/critest/registry)
  if [[ -n ${QK_RUNTIME_BIN:-} ]]; then
    QK=$QK_RUNTIME_BIN
  else
    (cd "$REPO_ROOT" && go build -o "$WORK/quantykube" ./cmd/quantykube)
    QK=$WORK/quantykube
    "$QK" runtime --help >/dev/null 2>&1 || { echo "$(basename "$0"): $QK has no 'runtime' command: wire internal/runtime/cli.NewCommand() into cmd/quantykube or set QK_RUNTIME_BIN" >&2; exit 1; }
  fi
  qk_cleanup; set -e
  # The bridge plugin (isGateway) turns on the host's IPv4 forwarding; qk_cleanup puts back
  # the value saved here (a crashed run's file is restored by the next run's cleanup above).
  sysctl -n net.ipv4.ip_forward >"$WORK/ip_forward.orig"

  log "starting the stand-in registry on 127.0.0.1:$PORT"
  rm -f "$WORK/registry.ready"
  "$WORK/registry" -addr 127.0.0.1:$PORT -busybox-root "$WORK/standins/rootfs" -nonewprivs "$WORK/standins/nonewprivs" \
    -pause "$WORK/standins/pause" -webserver "$WORK/standins/webserver" -ready-file "$WORK/registry.ready" >"$WORK/registry.log" 2>&1 &
  REG_PID=$!
  for _ in $(seq 100); do [[ -f $WORK/registry.ready ]] && break; kill -0 $REG_PID 2>/dev/null || { cat "$WORK/registry.log" >&2; exit 1; }; sleep 0.2; done
  [[ -f $WORK/registry.ready ]] || { echo "registry not ready after 20s: see $WORK/registry.log" >&2; exit 1; }

  mkdir -p "$RUN/cni" "$WORK/root"
  cat >"$RUN/cni/10-qkcritest.conflist" <<JSON
{"cniVersion":"1.0.0","name":"qkcritest","plugins":[
 {"type":"bridge","bridge":"$BRIDGE","isGateway":true,"ipMasq":false,"hairpinMode":true,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"$SUBNET"}]],"routes":[{"dst":"0.0.0.0/0"}],"dataDir":"$RUN/ipam"}},
 {"type":"portmap","capabilities":{"portMappings":true}}]}
JSON
  {
    cat <<TOML
socket = "$RUN/rt.sock"
state_dir = "$RUN/state"
root_dir = "$WORK/root"
runc_path = "$RUNC"
runc_root = "$RUN/runc"
cni_conf_dir = "$RUN/cni"
cni_bin_dirs = ["$CNIBIN"]
cni_cache_dir = "$RUN/cni-cache"
pause_image = "registry.k8s.io/pause:3.10.2"
cgroup_parent = "/qkcritest"
log_level = "info"
TOML
    for h in registry.k8s.io gcr.io k8s.gcr.io docker.io quay.io; do
      printf '[mirrors."%s"]\nendpoints = ["http://127.0.0.1:%s"]\nskip_upstream = true\n' "$h" "$PORT"
    done
  } >"$RUN/runtime.toml"
}

qk_start_rt() {
  rm -f "$RUN/rt.sock"
  "$QK" runtime --config "$RUN/runtime.toml" >>"$WORK/runtime.log" 2>&1 &
  RT_PID=$!
  for _ in $(seq 100); do [[ -S $RUN/rt.sock ]] && return 0; kill -0 $RT_PID 2>/dev/null || break; sleep 0.1; done
  tail -20 "$WORK/runtime.log" >&2; echo "runtime did not start: see $WORK/runtime.log" >&2; exit 1
}

qk_leaks() {
  local n
  n=$($CRI pods -q 2>/dev/null | wc -l); ((n == 0)) || echo "$n sandboxes"
  n=$(ls "$RUN/state/netns" 2>/dev/null | wc -l); ((n == 0)) || echo "$n netns"
  n=$(grep -cE " ($RUN|$WORK/root)/" /proc/self/mounts || true); ((n == 0)) || echo "$n mounts"
  n=$(find /sys/fs/cgroup/*/qkcritest -mindepth 1 -type d 2>/dev/null | wc -l); ((n == 0)) || echo "$n cgroups"
  n=$(find "$RUN/ipam" -type f -name '10.*' 2>/dev/null | wc -l); ((n == 0)) || echo "$n CNI IP allocations"
  n=$(ls "$WORK/root/rw" 2>/dev/null | wc -l); ((n == 0)) || echo "$n writable layers"
  n=$(pgrep -fc -- "--dir $RUN/state/" || true); ((n == 0)) || echo "$n monitor processes"
  n=$(iptables -t nat -S 2>/dev/null | grep -c -- "-N CNI-DN-" || true); ((n == 0)) || echo "$n portmap chains"
}

qk_cleanup() {
  set +e
  [[ -S $RUN/rt.sock ]] && $CRI rmp -fa >/dev/null 2>&1
  [[ -n $RT_PID ]] && kill "$RT_PID" 2>/dev/null && wait "$RT_PID" 2>/dev/null
  [[ -n $REG_PID ]] && kill "$REG_PID" 2>/dev/null && wait "$REG_PID" 2>/dev/null
  RT_PID= REG_PID=
  # Containers of a runtime that died before removing them: kill them through runc; their
  # monitors then record the exit and end by themselves.
  if [[ -d $RUN/runc && -n ${RUNC:-} ]]; then
    for id in $("$RUNC" --root "$RUN/runc" list -q 2>/dev/null); do
      "$RUNC" --root "$RUN/runc" kill --all "$id" KILL 2>/dev/null
      "$RUNC" --root "$RUN/runc" delete --force "$id" 2>/dev/null
    done
    for _ in $(seq 50); do pgrep -f -- "--dir $RUN/state/" >/dev/null || break; sleep 0.1; done
  fi
  # Anything a crashed run left: mounts below the state dirs, the bridge, cgroups, state.
  grep -E " ($RUN|$WORK/root)/" /proc/self/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l
  ip link del "$BRIDGE" 2>/dev/null
  qk_portmap_cleanup
  for d in /sys/fs/cgroup/*/qkcritest; do [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null; done
  rm -rf "$RUN" "$WORK/root"
  # net.ipv4.ip_forward as it was before the first pod: writing it resets every interface's
  # forwarding and all.accept_redirects to match, as they were.
  if [[ -f $WORK/ip_forward.orig ]]; then
    sysctl -qw "net.ipv4.ip_forward=$(cat "$WORK/ip_forward.orig")" && rm -f "$WORK/ip_forward.orig"
  fi
}

# qk_portmap_cleanup removes the portmap plugin's shared nat chains when no pod on the host
# uses them any more (no CNI-DN-* chain left): the plugin creates them on first use and
# never deletes them; it recreates them when needed.
qk_portmap_cleanup() {
  iptables -t nat -S 2>/dev/null | grep -q -- "-N CNI-DN-" && return 0
  iptables -t nat -S 2>/dev/null | grep -q -- "-N CNI-HOSTPORT-DNAT" || return 0
  iptables -t nat -D PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT 2>/dev/null
  iptables -t nat -D OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT 2>/dev/null
  iptables -t nat -D POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ 2>/dev/null
  for c in CNI-HOSTPORT-DNAT CNI-HOSTPORT-MASQ CNI-HOSTPORT-SETMARK; do
    iptables -t nat -F "$c" 2>/dev/null; iptables -t nat -X "$c" 2>/dev/null
  done
  return 0
}
