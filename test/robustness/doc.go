// Package robustness runs etcd's robustness traffic (go.etcd.io/etcd/tests/v3/robustness:
// the Kubernetes and etcd key-value traffic profiles, the recording clients and
// the validators) against a 3-member cluster while a killer SIGKILLs a member
// every few seconds and restarts it on the same data directory.
//
// The cluster is either real etcd or `quantykube store` with the same etcd
// flags (-server etcd|store). Everything listens on 127.0.0.1 in plaintext
// (the robustness clients assume it). After the traffic, every member's watch
// stream from revision 2 is collected, the members' WAL is read back as the
// persisted requests, and validate.ValidateAndReturnVisualize checks that the
// operations are linearizable and that every watch was ordered, unique,
// atomic, reliable, resumable and bookmarkable, as etcd's library defines it.
//
// Invariants:
//   - At most one member is down at a time: the killer waits until a
//     restarted member answers Status() before it picks the next victim, so
//     the cluster keeps its quorum except when the harness itself is broken.
//   - No process outlives the test: every member is in its own process group
//     with Pdeathsig, and is SIGKILLed at cleanup.
//   - A validation failure, a failed final write, a hash mismatch between the
//     members, or missing persisted requests (no WAL to read) fails the test.
//
// It is its own Go module (test/robustness/go.mod) so the quantykube module
// does not pull etcd's test dependencies; test/robustness/run.sh builds and
// runs it.
package robustness
