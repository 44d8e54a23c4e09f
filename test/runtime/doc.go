// Package runtimee2e tests `quantykube runtime` on this host with real components: runc,
// the CNI plugins (bridge, host-local, portmap), a real kubelet v1.36.3, and critest's
// stand-in images served from an in-process registry through the runtime's mirrors.
//
//   - TestRestart: kill -9 of the runtime stops nothing (the container keeps logging, its
//     web server keeps answering on the pod IP); a restarted runtime recovers the pod
//     (Ready, Running, exec, logs), then removes it without leftovers.
//   - TestKubelet: a standalone kubelet runs a two-container static pod on the runtime:
//     CRI-format logs, exec, a 10 s runtime outage with no container restarted, removal by
//     kubelet with nothing left behind.
//
// Run them with scripts/critest/restart.sh and scripts/critest/kubelet.sh, which get runc,
// the CNI plugins and kubelet from scripts/deps.sh. By hand, as root:
//
//	eval "$(scripts/deps.sh env runc cni-plugins kubelet)"
//	go test -count=1 -v -run 'TestRestart|TestKubelet' ./test/runtime
//
// Environment: QK_RUNC, QK_CNI_PLUGINS (both tests) and QK_KUBELET (TestKubelet) name
// the binaries; without them, or without root, the tests skip (with QK_RUNTIME_REQUIRED=true,
// which the scripts set, they fail instead). QK_RUNTIME_BIN is the quantykube binary
// (default: built from ./cmd/quantykube). QK_CACHE is the cache root (default ~/.cache/quantykube;
// logs in $QK_CACHE/critest/), QK_CRITEST_RUN the state dir (default /run/qkcritest).
// The tests use what scripts/critest.sh uses: the bridge qkcrit0 on 10.231.77.0/24, the
// cgroup parent /qkcritest (and /qkcrit-kubelet for kubelet), so they must not run while
// critest does; everything they make is removed when they end.
package runtimee2e
