#!/usr/bin/env bash
# bench/profile.sh — CPU profiles of QuantyKube's store under the benchmark's workloads.
#
#   bench/profile.sh [--keys N] [--puts N]
#
# Builds bench/cmd/qkstore-pprof (the store with net/http/pprof) and bench/cmd/qkprofile, runs
# put@64 (etcd's benchmark tool), create/update transactions at 64 clients, paged range and
# RangeStream over the key space, and writes <workload>.pprof and <workload>.top.txt under
# ${QK_CACHE:-~/.cache/quantykube}/bench/profile/. Inspect with: go tool pprof -http 127.0.0.1:0 FILE.pprof
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if command -v go >/dev/null 2>&1; then GO=$(command -v go)
elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
else echo "bench/profile.sh: no Go toolchain; install Go 1.26 at /usr/local/go or put go on PATH" >&2; exit 1; fi
CACHE=${QK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quantykube}
mkdir -p "$CACHE/bench/bin"
CACHE=$(cd "$CACHE" && pwd)
BENCH=$("$REPO/scripts/deps.sh" path etcd-benchmark)
(cd "$REPO" && CGO_ENABLED=${QK_BENCH_CGO:-0} "$GO" build -o "$CACHE/bench/bin/qkstore-pprof" ./bench/cmd/qkstore-pprof &&
  "$GO" build -o "$CACHE/bench/bin/qkprofile" ./bench/cmd/qkprofile)
OUT=$CACHE/bench/profile
rm -rf "$OUT" "$OUT.work"
"$CACHE/bench/bin/qkprofile" --store-pprof "$CACHE/bench/bin/qkstore-pprof" --etcd-benchmark "$BENCH" \
  --work "$OUT.work" --out "$OUT" --go "$GO" "$@"
rm -rf "$OUT.work/data"
echo "profiles in $OUT" >&2
