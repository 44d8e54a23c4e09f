// Package testserver replaces k8s.io/apiserver/pkg/storage/etcd3/testserver
// for the Kubernetes storage test suites run by test/k8s-storage/run.sh.
//
// It exports the same API the suites call — NewTestConfig(t) and
// RunEtcd(t, cfg) — but instead of an embedded etcd it starts a fresh server
// PROCESS per call: `quantykube store` (the default) or, to validate the
// harness itself, a real etcd binary. run.sh copies this package into a copy
// of the k8s.io/apiserver module at k8s.io/apiserver/pkg/storage/quantykube/testserver
// and rewrites the suites' imports to it; it is never built inside the
// quantykube module (test/k8s-storage has its own go.mod).
//
// Invariants:
//   - Every RunEtcd call gets its own process, port and t.TempDir() data
//     directory; the process is stopped by t.Cleanup after the clients the
//     test registered later are closed, and dies with the test binary
//     (Pdeathsig), so no server outlives its test.
//   - RunEtcd returns only once an etcd client Status() call succeeds.
//   - The server's output is kept in a file and printed when the test fails
//     or the process exits on its own.
//
// Environment:
//
//	QK_K8S_STORAGE_SERVER  "quantykube" (default) or "etcd"
//	QK_STORE_BIN           quantykube binary (server "quantykube")
//	QK_ETCD                etcd binary (server "etcd"), e.g. from scripts/deps.sh env etcd
//	QK_STORE_LOG           "always" prints the server log even when the test passes
package testserver
