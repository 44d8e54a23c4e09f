#!/usr/bin/env bash
# bench/run.sh — QuantyKube's store against etcd and kine (SQLite), side by side, in one run.
#
#   bench/run.sh            full run: 3 interleaved runs, writes docs/benchmarks.md (takes ~25–40 min)
#   bench/run.sh --quick    smoke check for CI: every workload once at small sizes (< 5 min once the
#                           peers are built); writes $QK_CACHE/bench/quick/benchmarks-quick.md
#   bench/run.sh [--quick] [qkbench flags...]   e.g. --runs 5, --only etcd,kube,keyspace, --keep-data
#   bench/run.sh --members 3 [--quick]   3-member store vs 3-member etcd: put@64, txn, ranges, leader failover;
#                           writes $QK_CACHE/bench/members3-<time>/benchmarks-3-members.md (never docs/);
#                           the store is skipped, with the reason, while it has no --initial-cluster
#   bench/run.sh --keys 1000000   size run: the key space workload alone with that many 1 KiB keys on the store
#                           and etcd, one run (load, LIST, RangeStream, updates, move copy, compaction, RSS,
#                           disk; ~3 GB of disk for the store, more for etcd); writes
#                           $QK_CACHE/bench/keys<N>-<time>/benchmarks-<N>-keys.md (never docs/); --stores,
#                           --runs pass through (e.g. --stores quantykube,etcd,kine)
#
# What it does: builds the peers through scripts/deps.sh (cached by version under ${QK_CACHE:-~/.cache/quantykube}),
# builds quantykube and the harness (bench/cmd/qkbench), then runs the harness. The harness exits
# non-zero when any workload did not run on any store; it never asserts a number.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
QUICK=0
MEMBERS=1
KEYS=
ARGS=()
while (($#)); do
  case $1 in
    --quick) QUICK=1 ;;
    --members) (($# >= 2)) || { echo "bench/run.sh: --members needs 1 or 3" >&2; exit 1; }; MEMBERS=$2; shift ;;
    --keys) (($# >= 2)) || { echo "bench/run.sh: --keys needs a key count, e.g. 1000000" >&2; exit 1; }; KEYS=$2; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) ARGS+=("$1") ;;
  esac
  shift
done
[[ $MEMBERS == 1 || $MEMBERS == 3 ]] || { echo "bench/run.sh: --members $MEMBERS: use 1 or 3" >&2; exit 1; }
if [[ -n $KEYS ]]; then
  [[ $KEYS =~ ^[1-9][0-9]*$ ]] || { echo "bench/run.sh: --keys $KEYS: pass a key count, e.g. 1000000" >&2; exit 1; }
  ((MEMBERS == 1)) || { echo "bench/run.sh: --keys runs one member per store; drop --members" >&2; exit 1; }
fi

if command -v go >/dev/null 2>&1; then GO=$(command -v go)
elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
else echo "bench/run.sh: no Go toolchain; install Go 1.26 at /usr/local/go or put go on PATH" >&2; exit 1; fi

CACHE=${QK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quantykube}
mkdir -p "$CACHE/bench/bin"
CACHE=$(cd "$CACHE" && pwd)
log() { printf '[bench %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

log "peers: scripts/deps.sh path etcd etcd-benchmark kine kube-apiserver"
mapfile -t PEERS < <("$REPO/scripts/deps.sh" path etcd etcd-benchmark kine kube-apiserver)
((${#PEERS[@]} == 4)) || { echo "bench/run.sh: scripts/deps.sh did not return 4 paths" >&2; exit 1; }

BIN=$CACHE/bench/bin
log "building quantykube and bench/cmd/qkbench"
# The store is built as scripts/image.sh ships it: CGO_ENABLED=0 -trimpath, whatever the environment
# says (with cgo pebble's memtables and block cache are C memory, without it Go heap: ADR 001, 013).
# The tag drops kustomize's Go-plugin loader (kubectl's drain -> cli-runtime -> kustomize), which only a
# cgo build links (34 MB of binary, 9 MiB of an idle store's RSS: ADR 001, "Memory"); kept for QK_BENCH_CGO=1.
BENCH_CGO=${QK_BENCH_CGO:-0}
(cd "$REPO" && CGO_ENABLED=$BENCH_CGO "$GO" build -trimpath -tags kustomize_disable_go_plugin_support -o "$BIN/quantykube" ./cmd/quantykube &&
  "$GO" build -o "$BIN/qkbench" ./bench/cmd/qkbench)

REV=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n $(git -C "$REPO" status --porcelain -- cmd internal go.mod 2>/dev/null) ]]; then REV="$REV + uncommitted changes"; fi

if ((MEMBERS == 3)); then
  if ((QUICK)); then WORK=$CACHE/bench/quick-3-members; MODE=(--quick); else WORK=$CACHE/bench/members3-$(date -u +%Y%m%dT%H%M%SZ); MODE=(); fi
  OUT=$WORK/benchmarks-3-members.md
  MODE+=(--members 3)
elif [[ -n $KEYS ]]; then
  if ((QUICK)); then WORK=$CACHE/bench/quick-keys$KEYS; MODE=(--quick); else WORK=$CACHE/bench/keys$KEYS-$(date -u +%Y%m%dT%H%M%SZ); MODE=(); fi
  OUT=$WORK/benchmarks-$KEYS-keys.md
  MODE+=(--keys "$KEYS")
elif ((QUICK)); then
  WORK=$CACHE/bench/quick
  OUT=$WORK/benchmarks-quick.md
  MODE=(--quick)
else
  WORK=$CACHE/bench/full-$(date -u +%Y%m%dT%H%M%SZ)
  OUT=$REPO/docs/benchmarks.md
  MODE=()
  mkdir -p "$REPO/docs"
fi
rm -rf "$WORK"
mkdir -p "$WORK"
log "work dir $WORK; report $OUT; load average $(cut -d' ' -f1-3 /proc/loadavg)"

"$BIN/qkbench" "${MODE[@]}" \
  --store "$BIN/quantykube" --etcd "${PEERS[0]}" --etcd-benchmark "${PEERS[1]}" --kine "${PEERS[2]}" \
  --kube-apiserver "${PEERS[3]}" --work "$WORK" --out "$OUT" --json "$WORK/results.json" \
  --analysis "$REPO/bench/analysis.md" \
  --versions "quantykube=commit $REV, built with $("$GO" env GOVERSION), CGO_ENABLED=$BENCH_CGO -trimpath (the image: CGO_ENABLED=0)" \
  "${ARGS[@]}"
log "done: report $OUT (unless --out overrode it); raw results $WORK/results.json"
