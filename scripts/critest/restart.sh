#!/usr/bin/env bash
# restart.sh — the runtime can die and come back without disturbing its pods:
# start the runtime, run a pod (CNI network) whose container logs a tick every 0.2 s,
# kill -9 the runtime, check the container still runs and still logs, start the runtime
# again, check it recovered the pod (Ready, Running, exec works, logs continue), remove
# the pod and check that nothing is left behind. Prints "restart test: PASS" or fails.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
trap qk_cleanup EXIT
fail() { echo "restart test: FAIL: $*" >&2; exit 1; }
qk_setup
: >"$WORK/runtime.log"
qk_start_rt
T=$(mktemp -d); trap 'qk_cleanup; rm -rf "$T"' EXIT
cat >"$T/pod.json" <<JSON
{"metadata":{"name":"restart","namespace":"qk","uid":"restart-uid","attempt":0},"log_directory":"$T/logs","hostname":"restart"}
JSON
cat >"$T/ctr.json" <<'JSON'
{"metadata":{"name":"ticker"},"image":{"image":"registry.k8s.io/e2e-test-images/busybox:1.29-2"},
 "command":["sh","-c","i=0; while true; echo tick $i; i=$((i+1)); do sleep 0.2; done"],"log_path":"ticker.log"}
JSON
cat >"$T/web.json" <<'JSON'
{"metadata":{"name":"web"},"image":{"image":"registry.k8s.io/e2e-test-images/nginx:1.14-2"},"log_path":"web.log"}
JSON
$CRI pull registry.k8s.io/e2e-test-images/busybox:1.29-2 >/dev/null
$CRI pull registry.k8s.io/e2e-test-images/nginx:1.14-2 >/dev/null
POD=$($CRI runp "$T/pod.json")
CID=$($CRI create "$POD" "$T/ctr.json" "$T/pod.json")
$CRI start "$CID" >/dev/null
WEB=$($CRI create "$POD" "$T/web.json" "$T/pod.json")
$CRI start "$WEB" >/dev/null
sleep 1
PID=$($CRI inspect "$CID" | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' | head -1)
[[ -n $PID ]] && kill -0 "$PID" || fail "no container pid"
IP=$($CRI inspectp "$POD" | sed -n 's/.*"ip": *"\([0-9.]*\)".*/\1/p' | head -1)
log "pod $POD ip $IP, container $CID pid $PID"

log "kill -9 the runtime"
kill -9 "$RT_PID"; wait "$RT_PID" 2>/dev/null || true; RT_PID=
before=$(wc -l <"$T/logs/ticker.log")
sleep 1
after=$(wc -l <"$T/logs/ticker.log")
kill -0 "$PID" 2>/dev/null || fail "container died with the runtime"
((after > before)) || fail "container stopped logging while the runtime was down ($before -> $after lines)"
timeout 5 bash -c "exec 3<>/dev/tcp/$IP/80 && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && grep -q nginx <&3" \
  || fail "pod's web server at $IP:80 unreachable while the runtime was down"

log "restart the runtime"
qk_start_rt
$CRI pods --id "$POD" | grep -q Ready || fail "sandbox not Ready after restart"
$CRI ps --id "$CID" | grep -q Running || fail "container not Running after restart"
[[ $($CRI exec "$CID" echo alive) == alive ]] || fail "exec after restart"
sleep 0.5
n=$(wc -l <"$T/logs/ticker.log"); ((n > after)) || fail "log stopped after restart"
$CRI logs "$CID" 2>/dev/null | tail -1 | grep -q "^tick " || fail "crictl logs after restart"

log "remove the pod"
$CRI stopp "$POD" >/dev/null && $CRI rmp "$POD" >/dev/null
kill -0 "$PID" 2>/dev/null && fail "container still running after pod removal"
mapfile -t leaks < <(qk_leaks)
((${#leaks[@]} == 0)) || fail "left behind: ${leaks[*]}"
echo "restart test: PASS (container pid $PID survived kill -9 of the runtime; $n log lines; nothing left behind)"
