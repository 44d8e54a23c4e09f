// Package mvcc is QuantyKube's multi-version key-value store: the engine under
// the etcd v3 API served by `quantykube store`.
//
// # Data model
//
// The store has one monotonically increasing main revision. An empty store is
// at revision 1. Every write request that changes at least one key raises the
// revision by exactly one; the changes of one request are numbered by a
// sub-revision (0, 1, ...). A request that changes nothing (a delete of absent
// keys, a read-only txn) does not raise it. Every key carries etcd's
// create_revision, mod_revision, version and lease.
//
// # Layout on disk (pebble)
//
//	l/<key>                      the live value of key (mvccpb.KeyValue); absent when deleted
//	h/<esc(key)>\x00\x01<^rev>   history: every put and delete of key at main revision rev,
//	                             newest first (rev inverted); value = one type byte + KeyValue
//	e/<rev><sub>                 event log in revision order: the key changed at (rev, sub)
//	m/...                        metadata: current and compacted revision, format, ids,
//	                             applied raft index and ConfState (members)
//	c/m/<id>, c/r/<id>           cluster members (etcdserverpb.Member) and removed ids (members)
//	s/<lease id>                 granted leases: granted TTL and absolute expiry
//
// Reads at the current revision scan l/ (one entry per live key); reads at an
// older revision scan h/ and pick, per key, the newest entry at or below it.
// Watchers that start in the past replay e/ and look the changes up in h/.
//
// # Memory: the index of live keys
//
// The store keeps one in-memory index entry per live key — its key,
// create_revision, mod_revision, version and lease (about 115 bytes of heap
// for a 45-byte key; index.go) — so that the committer evaluates puts,
// creates and compares without reading pebble, and a Range with a limit or
// count_only counts without reading values. The index is derived: it is
// rebuilt from l/ when the store opens and never written to disk. Values
// and history live only in pebble, so memory grows with the number of live
// keys, watchers and leases, not with the size of values or of the history.
//
// # Invariants
//
//   - A write is acknowledged only after its pebble batch is synced to the WAL
//     (unless the store was opened with NoSync, for tests). pebble publishes a
//     synced batch only after the fsync, so no reader ever sees an
//     unacknowledged write.
//   - Writes are evaluated by one committer goroutine, in groups: every request
//     of a group is evaluated in order against the state left by the previous
//     one (through an indexed batch), then the whole group is committed with a
//     single fsync (group commit).
//   - Every write is a data request (etcdserverpb.InternalRaftRequest)
//     evaluated by writeTxn.applyRequest: by the committer of a single store,
//     or by ApplyEntries on every member of a replicated one (package
//     replica), so both have the same semantics. A replicated member commits
//     its applies unsynced, with the raft index in m/applied in the same
//     batch (the raft WAL is the durable log; docs/adr/008).
//   - m/rev is written in the same batch as the changes it counts, so a
//     snapshot always pairs data with its exact revision.
//   - History at or below the compacted revision is gone except the newest
//     entry of each key at or below it; Range below the compacted revision
//     returns ErrCompacted, and a watch starting below it is refused.
package mvcc
