#!/usr/bin/env bash
# critest.sh — run critest v1.37.0 against `quantykube runtime`, fully offline.
#
#   scripts/critest.sh [-- EXTRA CRITEST ARGS]
#
# Steps (scripts/critest/lib.sh): build critest/crictl/runc/CNI plugins (scripts/deps.sh),
# prepare the stand-in image files (scripts/critest/standins.sh), start a local in-memory
# registry serving them under critest's image names (scripts/critest/registry), start the
# runtime with registry mirrors pointing at it (skip_upstream: nothing leaves the machine),
# run critest, check that the removed pods left nothing behind, print the result line, and
# clean up (pods, runtime, registry, bridge, mounts, cgroups).
#
# Environment:
#   QK_CACHE            cache root (default ${XDG_CACHE_HOME:-~/.cache}/quantykube); logs in $QK_CACHE/critest/
#   QK_RUNTIME_BIN      a quantykube binary with the `runtime` command (default: built from ./cmd/quantykube)
#   QK_CRITEST_SKIP     ginkgo skip regexp (default 'digest': the only spec that cannot run offline;
#                       AppArmor, SELinux, NRI, user-namespace and image-volume specs skip themselves)
#   QK_CRITEST_FOCUS    ginkgo focus regexp (default: all)
#   QK_CRITEST_PORT     registry port (default 5099)
# Exit status: critest's, or 3 when critest passed but pods left something behind.
# The last line printed is critest's result line ("SUCCESS! -- N Passed | 0 Failed | ...").
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/critest/lib.sh"
SKIP=${QK_CRITEST_SKIP:-digest}
FOCUS=${QK_CRITEST_FOCUS:-}
trap qk_cleanup EXIT
qk_setup
: >"$WORK/runtime.log"
log "starting the runtime"
qk_start_rt

log "running critest (skip: $SKIP)"
args=(--runtime-endpoint "unix://$RUN/rt.sock" --image-endpoint "unix://$RUN/rt.sock" "--ginkgo.skip=$SKIP"
  --ginkgo.no-color "--ginkgo.junit-report=$WORK/junit.xml")
[[ -n $FOCUS ]] && args+=("--ginkgo.focus=$FOCUS")
[[ ${1:-} == -- ]] && shift && args+=("$@")
set +e
"$CRITEST" "${args[@]}" >"$WORK/critest.log" 2>&1
rc=$?
set -e
mapfile -t leaks < <(qk_leaks)
if ((${#leaks[@]})); then
  log "LEFT BEHIND after critest: ${leaks[*]}"
  ((rc != 0)) || rc=3
else
  log "nothing left behind (sandboxes, netns, mounts, cgroups, CNI IPs, writable layers, monitors)"
fi
grep -E "^\s*\[FAIL\]|^\s*\[PANICKED\]" "$WORK/critest.log" | sed 's/^\s*//' | sort -u >&2 || true
grep -E "^Ran [0-9]+ of [0-9]+ Specs" "$WORK/critest.log" || true
grep -E "Passed \| [0-9]+ Failed" "$WORK/critest.log" || tail -20 "$WORK/critest.log" >&2
exit $rc
