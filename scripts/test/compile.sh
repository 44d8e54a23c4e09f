#!/usr/bin/env bash
# compile.sh DIR [PKG...]: every test binary of the run, compiled once (go test -c), into DIR as
# <import path below the module, / as _>.test (test/move -> test_move.test; its directory in
# <that name>.dir), two at a time; then
# scripts/test/gotest.sh runs them for stage 1 and the cluster steps run theirs (QK_TESTBIN,
# scripts/kubeadm/lib/common.sh go_test): no stage compiles a test package again, and no cluster
# step waits for a compile. Default PKG: every package of the module with tests.
# Each binary is written beside its final name and renamed into place: a binary in DIR is whole.
# A binary already in DIR is kept (DIR is one run's: an earlier call of the run compiled it).
# Exit status: non-zero if any package failed to compile (its compiler output is printed).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
(($# >= 1)) || { echo "usage: scripts/test/compile.sh DIR [PKG...]" >&2; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd); shift
cd "$ROOT"
mod=$(go list -m)
if (($#)); then mapfile -t pkgs < <(go list "$@"); else
  mapfile -t pkgs < <(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./... | grep .)
fi
one() {
  local pkg=$1 rel name
  rel=${pkg#"$MOD"/}; name=${rel//\//_}.test
  [[ -x $OUT/$name ]] && return 0 # compiled earlier in this run (DIR is the run's own)
  echo "$rel" >"$OUT/${name%.test}.dir" # where gotest.sh runs it
  # -s -w: no symbol table or DWARF to write (a third of a big test binary's
  # link; failures still name files and lines, from the pcln table)
  go test -c -ldflags "-s -w" -o "$OUT/.$name.tmp" "$pkg" && mv -f "$OUT/.$name.tmp" "$OUT/$name"
}
export -f one
export MOD=$mod OUT=$out
printf '%s\n' "${pkgs[@]}" | xargs -P 2 -I{} bash -c 'one "$1"' _ {}
echo "compiled ${#pkgs[@]} test binaries into $out"
