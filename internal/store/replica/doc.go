// Package replica makes a `quantykube store` member of a cluster: the mvcc
// store is the state machine of etcd's raft (go.etcd.io/raft/v3), with
// etcd's own WAL (server/v3/storage/wal), snapshot metadata files
// (etcdserver/api/snap) and peer transport (etcdserver/api/rafthttp), so the
// consensus, log and wire format are the ones etcd runs in production.
//
// # Invariants
//
//   - Every write is an etcdserverpb.InternalRaftRequest in the raft log. A
//     member acknowledges a write only after the entry is committed (in the
//     synced WAL of a quorum) and applied locally; the apply is
//     deterministic (mvcc.Store.ApplyEntries), so every member computes the
//     same revisions and responses.
//   - The applied index is written in the same pebble batch as the entries
//     it accounts for; pebble batches are not synced (the WAL is), and a
//     restart replays the WAL after the applied index.
//   - Before a raft snapshot's metadata is saved, pebble is synced, so the
//     state machine is never behind a snapshot the WAL was truncated to.
//   - Linearizable reads wait for a ReadIndex confirmed by a quorum and for
//     the local apply to reach it; a member cut off from the quorum cannot
//     obtain one and answers with etcd's timeout or no-leader errors.
//   - A member that is new or too far behind installs a state snapshot: the
//     leader streams its whole pebble state through rafthttp's snapshot path.
//   - Only the leader expires leases; a new leader first gives every lease
//     its full TTL again (no mass expiry after an election).
package replica
