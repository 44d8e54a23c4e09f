#!/usr/bin/env bash
# run.sh — etcd's robustness traffic and validators against a 3-member cluster while a member is
# SIGKILLed every few seconds (go.etcd.io/etcd/tests/v3 robustness: traffic, client, validate).
#
#   test/robustness/run.sh [--server etcd|store] [--bin PATH] [--duration D] [--kill-interval D]
#                          [--run REGEX] [--broken-wipe-on-restart] [--keep-data] [--extra-args 'FLAGS']
#
#   --server etcd|store     3 members of etcd 3.6.16 (default) or of `quantykube store` with the same flags
#   --bin PATH              server binary (default: etcd from scripts/deps.sh; for store, go build ./cmd/quantykube)
#   --duration D            traffic time per scenario (default 40s)
#   --kill-interval D       mean time between kills (default 4s; each wait is 0.5–1.5× this)
#   --run REGEX             scenarios to run (-test.run), e.g. 'TestRobustness/Kubernetes'
#   --broken-wipe-on-restart  BROKEN ON PURPOSE: a killed member restarts on an empty data dir
#                           (shows the validators catch it; expected to fail)
#   --keep-data             keep the members' data dirs of passing scenarios
#   --extra-args 'FLAGS'    extra flags for every member
#
# Scenarios: Kubernetes (traffic.Kubernetes) and EtcdPutDeleteLease (traffic.EtcdPutDeleteLease), each at
# etcd's medium key-value rate with watches and compaction, on a fresh 3-member cluster.
# Output: ${QK_CACHE:-~/.cache/quantykube}/robustness/<time>-<server>/: test.log, <scenario>/summary.json,
# member logs m0..m2.log, and on failure <scenario>/report/ (client reports, data dirs, history.html).
# Exit status: 0 when every scenario validated, 1 when one failed, 2 on usage or build errors.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)
log() { printf '[robustness %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { printf 'run.sh: %s\n' "$*" >&2; exit 2; }

server=etcd bin="" duration=40s interval=4s run_re="" broken=0 keep=0 extra=""
while (($#)); do
  case $1 in
    --server) (($# >= 2)) || die "--server needs etcd or store"; server=$2; shift 2 ;;
    --bin) (($# >= 2)) || die "--bin needs a path"; bin=$2; shift 2 ;;
    --duration) (($# >= 2)) || die "--duration needs a duration like 40s"; duration=$2; shift 2 ;;
    --kill-interval) (($# >= 2)) || die "--kill-interval needs a duration like 4s"; interval=$2; shift 2 ;;
    --run) (($# >= 2)) || die "--run needs a regular expression"; run_re=$2; shift 2 ;;
    --broken-wipe-on-restart) broken=1; shift ;;
    --keep-data) keep=1; shift ;;
    --extra-args) (($# >= 2)) || die "--extra-args needs flags in one argument"; extra=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
    *) die "unknown argument '$1'; see --help" ;;
  esac
done
[[ $server == etcd || $server == store ]] || die "--server $server: use etcd or store"

command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || die "no Go toolchain; install Go 1.26 at /usr/local/go"
CACHE=${QK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quantykube}
mkdir -p "$CACHE/robustness"
CACHE=$(cd "$CACHE" && pwd)

if [[ -z $bin ]]; then
  if [[ $server == etcd ]]; then
    bin=$("$REPO_ROOT/scripts/deps.sh" path etcd) || die "scripts/deps.sh path etcd failed"
  else
    bin=$CACHE/robustness/quantykube
    log "building ./cmd/quantykube -> $bin"
    (cd "$REPO_ROOT" && go build -o "$bin.tmp" ./cmd/quantykube && mv -f "$bin.tmp" "$bin") ||
      die "go build ./cmd/quantykube failed; fix the build or pass --bin PATH"
  fi
fi
[[ -x $bin ]] || die "'$bin' is not executable; pass --bin PATH"
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
# The help text is read whole first: `grep -q` in the pipe would exit at the first match and, under
# pipefail, the writer's SIGPIPE failed the check now and then.
if [[ $server == store ]] && ! grep -q -- --initial-cluster <<<"$("$bin" store --help 2>&1)"; then
  die "'$bin store' has no --initial-cluster flag yet (replication, issue #13): nothing to run against the store"
fi

log "compiling the robustness test (go.etcd.io/etcd/tests/v3 robustness)"
(cd "$HERE" && go test -c -o "$CACHE/robustness/robustness.test" .) || die "go test -c in test/robustness failed"

results=$CACHE/robustness/$(date -u +%Y%m%dT%H%M%SZ)-$server
((broken)) && results+=-broken
mkdir -p "$results"
args=(-test.v -test.count 1 -test.timeout 60m -server "$server" -bin "$bin" -duration "$duration"
  -kill-interval "$interval" -results "$results")
[[ -n $run_re ]] && args+=(-test.run "$run_re")
((broken)) && args+=(-broken-wipe-on-restart)
((keep)) && args+=(-keep-data)
[[ -n $extra ]] && args+=(-extra-args "$extra")
log "server: $server ($bin); traffic $duration per scenario, a kill every ~$interval; results -> $results"
set +e
(cd "$HERE" && "$CACHE/robustness/robustness.test" "${args[@]}") >"$results/test.log" 2>&1
rc=$?
set -e
grep -E '^(=== RUN|--- (PASS|FAIL)|PASS$|FAIL$)|ROBUSTNESS|robustness_test.go:[0-9]+: [a-z]' "$results/test.log" |
  grep -v 'INFO\|WARN\|DEBUG' | tee "$results/summary.txt" || true
echo "details: $results (test.log, */summary.json)" >&2
((rc == 0)) || exit 1
