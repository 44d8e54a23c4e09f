#!/usr/bin/env bash
# run.sh — run the end-to-end tests of `quantykube store` with real components.
#
#   test/store/run.sh [store|etcd] [go test flags...]
#
#   store (default)  test the quantykube binary, built here from ./cmd/quantykube
#   etcd             test real etcd 3.6.16 instead (the reference: every test must pass on it)
#
# The snapshot tests (TestSnapshot*) run etcd, etcdctl, etcdutl and the store side by side either way.
#
# Real binaries come from scripts/deps.sh (built from the Go module proxy on first use, then cached
# under ${QK_CACHE:-~/.cache/quantykube}). Any QK_* variable already set wins over what this script finds.
# CI=true makes a missing binary a failure instead of a skip.
#
# Examples:
#   test/store/run.sh etcd
#   test/store/run.sh store -run TestKillNine
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KIND=${1:-store}
[[ $# -gt 0 ]] && shift
case $KIND in
  store|etcd) ;;
  *) echo "run.sh: unknown server kind '$KIND'; use store or etcd" >&2; exit 2 ;;
esac

want() { # want VAR NAME: set VAR from `scripts/deps.sh path NAME` unless it is already set
  if [[ -z ${!1:-} ]]; then
    local p
    p=$("$ROOT/scripts/deps.sh" path "$2")
    export "$1=$p"
  fi
}
want QK_ETCDCTL etcdctl
want QK_ETCDUTL etcdutl
want QK_ETCD etcd # the snapshot tests run etcd beside the store whichever KIND is tested
want QK_KUBE_APISERVER kube-apiserver
want QK_KUBE_CONTROLLER_MANAGER kube-controller-manager
if [[ -z ${QK_STORE_BIN:-} ]]; then # built for KIND=etcd too: the snapshot tests restore with it
  out=${QK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quantykube}/test-store
  mkdir -p "$out"
  (cd "$ROOT" && go build -o "$out/quantykube" ./cmd/quantykube)
  export QK_STORE_BIN=$out/quantykube
fi
export QK_STORE_CMD=$KIND

cd "$ROOT"
exec go test -count=1 -timeout 20m -v ./test/store/ "$@"
