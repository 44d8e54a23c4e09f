#!/usr/bin/env bash
# gotest.sh DIR [TIMEOUT]: stage 1's `go test -count=1 ./...` from the binaries scripts/test/compile.sh
# put in DIR: each package's binary run from its package directory (as go test runs it), two at a
# time (go test's -p on two cores); as go test without -v prints them, `ok` with its time for a
# package that passed, its whole output and then `FAIL` for one that failed. Exit status: non-zero if any package failed.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
(($# >= 1)) || { echo "usage: scripts/test/gotest.sh DIR [TIMEOUT]" >&2; exit 2; }
bins=$(cd "$1" && pwd)
MOD=$(cd "$ROOT" && go list -m)
export ROOT BINS=$bins TIMEOUT=${2:-30m} MOD
one() {
  local bin=$1 name rel dir t0 rc=0 log
  name=$(basename "$bin" .test)
  rel=$(cat "$BINS/$name.dir") # written by compile.sh
  dir=$ROOT/$rel
  log=$(mktemp)
  t0=$(date +%s.%N)
  (cd "$dir" && "$bin" -test.count=1 -test.timeout "$TIMEOUT") >"$log" 2>&1 || rc=$?
  local took; took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3fs", b - a }')
  if ((rc == 0)); then # as go test without -v: a passing package's output is not shown
    printf 'ok  \t%s\t%s\n' "$MOD/${dir#"$ROOT"/}" "$took"
  else
    cat "$log"
    printf 'FAIL\t%s\t%s\n' "$MOD/${dir#"$ROOT"/}" "$took"
  fi
  rm -f "$log"
  return $rc
}
export -f one
rc=0
find "$bins" -maxdepth 1 -name '*.test' | LC_ALL=C sort | xargs -P 2 -I{} bash -c 'one "$1"' _ {} || rc=$?
if ((rc == 0)); then echo "ok: every package passed"; else echo "FAIL: see the FAIL lines above"; fi
exit $rc
