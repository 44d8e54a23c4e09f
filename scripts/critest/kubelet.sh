#!/usr/bin/env bash
# kubelet.sh — runs TestKubelet (test/runtime/kubelet_test.go): a real kubelet v1.36.3 runs a
# static pod on `quantykube runtime`, through a 10 s kill -9 outage of the runtime, and removes
# it without leftovers. runc, the CNI plugins and kubelet come from scripts/deps.sh;
# QK_RUNTIME_BIN and QK_CACHE as for scripts/critest.sh. Extra arguments go to `go test`.
# A skip (not root) fails here: QK_RUNTIME_REQUIRED=true.
cd "$(dirname "$0")/../.." && export PATH=$PATH:/usr/local/go/bin QK_RUNTIME_REQUIRED=true && eval "$(scripts/deps.sh env runc cni-plugins kubelet)" && exec go test -count=1 -v -timeout 15m -run '^TestKubelet$' ./test/runtime "$@"
