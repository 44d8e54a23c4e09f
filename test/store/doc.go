// Package storee2e holds the end-to-end tests of `quantykube store` with real
// components: etcdctl 3.6, a crash-and-restart durability check, and a real
// kube-apiserver with kubectl.
//
// Every test starts its own server process on a fresh data directory, on free
// loopback ports, over TLS with client-certificate authentication, and kills it
// when the test ends. The server under test is chosen by QK_STORE_CMD:
// "store" (default, the quantykube binary in QK_STORE_BIN) or "etcd" (the real
// etcd in QK_ETCD). Each test must pass against etcd first, which makes it a
// conformance check for the store. See README.md for how to run them.
//
// The package has no non-test code besides this comment.
package storee2e
