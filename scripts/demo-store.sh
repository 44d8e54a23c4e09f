#!/usr/bin/env bash
# demo-store.sh — the store alone, without a cluster (the main demo is scripts/kubeadm.sh demo):
# start `quantykube store` over TLS with client-cert auth (certificates laid out as kubeadm makes
# them), run a real kube-apiserver v1.36.3 on it, and drive it with kubectl so a person can read
# what happens: create, list, watch, patch, delete, and resourceVersions that are the store's
# revisions. Everything runs under a temporary directory and is stopped at the end, newest first:
# kube-controller-manager, kube-apiserver (its graceful shutdown still has its storage), then the
# store — each SIGTERM, then SIGKILL after STOP_GRACE seconds; "done" is printed once all are gone.
#
# QK_STORE_BIN, QK_KUBE_APISERVER, QK_KUBE_CONTROLLER_MANAGER and KUBECTL (or QK_KUBECTL), when set,
# name the binaries to run instead of building and fetching them (test/store's TestDemoStore does).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d /tmp/quantykube-demo.XXXXXX)
STOP_GRACE=15
PIDS=() NAMES=() STARTS=() # started processes, oldest first, and their start times
# proc_start PID: the process's start time (field 22 of /proc/PID/stat, in clock ticks since boot),
# which with the PID names one process: bash reaps an exited child at once and, with pid_max 32768
# on a busy machine, its PID can be another process's a moment later (CI, 7 December: a PID-only
# check saw kube-controller-manager "alive" after it had exited and sent SIGKILL to that PID).
proc_start() {
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  s=${s##*) } # after the command name, which may hold spaces and parentheses
  set -- $s
  echo "${20}"
}
started() { PIDS+=("$1"); NAMES+=("$2"); STARTS+=("$(proc_start "$1" || echo gone)"); }
# alive PID START: the process started at START is still there and not a zombie.
alive() {
  local pid=$1 start=$2 s
  s=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  s=${s##*) }
  set -- $s
  [[ $1 != Z && ${20} == "$start" ]]
}
# stop_all stops the started processes newest first: SIGTERM, SIGKILL after STOP_GRACE seconds.
stop_all() {
  local i p n st
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    p=${PIDS[i]} st=${STARTS[i]}
    alive "$p" "$st" || { wait "$p" 2>/dev/null || true; continue; }
    kill -TERM "$p" 2>/dev/null || continue
    for ((n = 0; n < STOP_GRACE * 10; n++)); do alive "$p" "$st" || break; sleep 0.1; done
    if alive "$p" "$st"; then
      echo "demo-store.sh: ${NAMES[i]} (pid $p) did not exit ${STOP_GRACE} s after SIGTERM; SIGKILL" >&2
      kill -KILL "$p" 2>/dev/null || true
    fi
    wait "$p" 2>/dev/null || true
  done
  PIDS=() NAMES=() STARTS=()
}
cleanup() {
  stop_all
  rm -rf "$WORK"
}
trap cleanup EXIT
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

say "building quantykube and fetching kube-apiserver v1.36.3 (cached after the first run)"
QK=${QK_STORE_BIN:-$WORK/quantykube}
[[ -n ${QK_STORE_BIN:-} ]] || (cd "$REPO" && go build -o "$QK" ./cmd/quantykube)
APISERVER=${QK_KUBE_APISERVER:-} KCM=${QK_KUBE_CONTROLLER_MANAGER:-}
if [[ -z $APISERVER || -z $KCM ]]; then
  mapfile -t BINS < <("$REPO/scripts/deps.sh" path kube-apiserver kube-controller-manager)
  APISERVER=${BINS[0]}; KCM=${BINS[1]}
fi
KUBECTL=${KUBECTL:-${QK_KUBECTL:-$(command -v kubectl || true)}}
[[ -x "$KUBECTL" ]] || KUBECTL=$("$REPO/scripts/deps.sh" path kubectl 2>/dev/null || true)
[[ -x "$KUBECTL" ]] || { echo "demo-store.sh: kubectl not found; install it (apt-get install kubectl) or set KUBECTL" >&2; exit 1; }

say "making a PKI laid out as kubeadm's (/etc/kubernetes/pki)"
PKI=$WORK/pki; mkdir -p "$PKI/etcd"
cert() { # name cn org ca_dir [san]
  local n=$1 cn=$2 o=$3 ca=$4 san=${5:-}
  openssl req -new -newkey rsa:2048 -nodes -keyout "$n.key" -subj "/CN=$cn${o:+/O=$o}" -out "$n.csr" 2>/dev/null
  local ext="$n.ext"; printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n' >"$ext"
  [[ -n $san ]] && echo "subjectAltName=$san" >>"$ext"
  openssl x509 -req -in "$n.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial -days 1 -extfile "$ext" -out "$n.crt" 2>/dev/null
}
ca() { openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$1.key" -subj "/CN=$2" -days 1 -out "$1.crt" 2>/dev/null; }
ca "$PKI/etcd/ca" etcd-ca
cert "$PKI/etcd/server" localhost "" "$PKI/etcd/ca" "IP:127.0.0.1,DNS:localhost"
cert "$PKI/apiserver-etcd-client" kube-apiserver-etcd-client "" "$PKI/etcd/ca"
ca "$PKI/ca" kubernetes
cert "$PKI/apiserver" kube-apiserver "" "$PKI/ca" "IP:127.0.0.1,IP:10.96.0.1,DNS:kubernetes,DNS:localhost"
cert "$PKI/admin" kubernetes-admin system:masters "$PKI/ca"
openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null; openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null

STORE_PORT=$(free_port); METRICS_PORT=$(free_port); API_PORT=$(free_port)
say "starting quantykube store on https://127.0.0.1:$STORE_PORT (client-cert auth, fsync on)"
"$QK" store --name demo --data-dir "$WORK/store" \
  --listen-client-urls "https://127.0.0.1:$STORE_PORT" --listen-metrics-urls "http://127.0.0.1:$METRICS_PORT" \
  --cert-file "$PKI/etcd/server.crt" --key-file "$PKI/etcd/server.key" \
  --trusted-ca-file "$PKI/etcd/ca.crt" --client-cert-auth >"$WORK/store.log" 2>&1 &
started $! "quantykube store"
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$METRICS_PORT/health" >/dev/null && break; sleep 0.1; done
curl -s "http://127.0.0.1:$METRICS_PORT/health"; echo

say "starting kube-apiserver v1.36.3 on the store"
"$APISERVER" --etcd-servers "https://127.0.0.1:$STORE_PORT" --etcd-cafile "$PKI/etcd/ca.crt" \
  --etcd-certfile "$PKI/apiserver-etcd-client.crt" --etcd-keyfile "$PKI/apiserver-etcd-client.key" \
  --secure-port "$API_PORT" --bind-address 127.0.0.1 --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --client-ca-file "$PKI/ca.crt" --authorization-mode RBAC --service-cluster-ip-range 10.96.0.0/12 \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --service-account-issuer https://kubernetes.default.svc --event-ttl 1h >"$WORK/apiserver.log" 2>&1 &
started $! kube-apiserver
cat >"$WORK/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: demo, cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$PKI/ca.crt"}}]
users: [{name: admin, user: {client-certificate: "$PKI/admin.crt", client-key: "$PKI/admin.key"}}]
contexts: [{name: demo, context: {cluster: demo, user: admin}}]
current-context: demo
KC
export KUBECONFIG=$WORK/kubeconfig
for i in $(seq 120); do "$KUBECTL" get --raw /readyz >/dev/null 2>&1 && break; sleep 0.5
  [[ $i == 120 ]] && { tail -20 "$WORK/apiserver.log"; echo "kube-apiserver did not become ready" >&2; exit 1; }; done
"$KCM" --kubeconfig "$KUBECONFIG" --authentication-kubeconfig "$KUBECONFIG" --authorization-kubeconfig "$KUBECONFIG" \
  --leader-elect=false --controllers namespace,garbagecollector,serviceaccount-token,serviceaccount \
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" --secure-port 0 >"$WORK/kcm.log" 2>&1 &
started $! kube-controller-manager
k() { printf '$ kubectl %s\n' "$*"; "$KUBECTL" "$@"; }
k get --raw '/readyz?verbose' | tail -4

say "objects live in the store; their resourceVersions are the store's revisions"
k create namespace demo
k -n demo create configmap greeting --from-literal=hello=world
k -n demo get configmap greeting -o jsonpath='{.metadata.resourceVersion}{"\n"}'
(timeout 6 "$KUBECTL" -n demo get configmaps --watch-only -o custom-columns=EVENT:.metadata.name,RV:.metadata.resourceVersion,DATA:.data >"$WORK/watch.out" 2>&1 &)
sleep 1.5
k -n demo patch configmap greeting --type merge -p '{"data":{"hello":"store"}}'
for i in 1 2 3; do "$KUBECTL" -n demo create configmap "cm-$i" --from-literal=i="$i" >/dev/null; done
k -n demo get configmaps
k -n demo delete configmap cm-2
sleep 4
say "what a watcher saw meanwhile"
cat "$WORK/watch.out"
say "deleting the namespace completes (kube-controller-manager empties it through the store)"
k delete namespace demo --timeout=90s
k get namespaces
say "the store seen through its own metrics"
curl -s "http://127.0.0.1:$METRICS_PORT/metrics" | grep -E '^quantykube_store_(revision|compacted_revision|disk_size_bytes) '
say "stopping kube-controller-manager, kube-apiserver, then the store (SIGTERM; SIGKILL after ${STOP_GRACE} s)"
t0=$(date +%s%N)
stop_all
rm -rf "$WORK"
ms=$((($(date +%s%N) - t0) / 1000000))
say "done: kube-controller-manager, kube-apiserver and the store stopped in $((ms / 1000)).$(printf %03d $((ms % 1000))) s; $WORK removed"
