#!/usr/bin/env bash
# restart.sh — runs TestRestart (test/runtime/restart_test.go): kill -9 of `quantykube runtime`
# with a pod running stops nothing, and the restarted runtime recovers the pod. runc and the CNI
# plugins come from scripts/deps.sh; QK_RUNTIME_BIN and QK_CACHE as for scripts/critest.sh.
# Extra arguments go to `go test`. A skip (not root) fails here: QK_RUNTIME_REQUIRED=true.
cd "$(dirname "$0")/../.." && export PATH=$PATH:/usr/local/go/bin QK_RUNTIME_REQUIRED=true && eval "$(scripts/deps.sh env runc cni-plugins)" && exec go test -count=1 -v -timeout 15m -run '^TestRestart$' ./test/runtime "$@"
