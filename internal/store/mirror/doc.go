// Package mirror moves a replicated store's role between clusters with the
// API always answering (docs/adr/202-moving-a-replicated-control-plane.md).
//
// One mechanism serves both directions: a replayer applies each revision of
// a source cluster, watched from the revision a target holds identically,
// as one transaction on the target (its puts with their leases and its
// deletes, in sub-revision order), and checks that the target makes the
// source's revision. Divergence is an error, never papered over.
//
// The store's mode is replicated state (mvcc's m/mode, changed only by
// raft entries, so every member switches at the same index):
//
//   - owner: the store is the source of truth.
//   - mirror(source): the leader replays the source into the store (through
//     the store's own proposals); every member serves reads locally, fences
//     linearizable reads on the source's revision, and forwards writes to
//     the source, answering once it has applied the answer's revision.
//   - replaying-to(target): an owner whose leader replays the store's own
//     changes onto an etcd target.
//
// Transitions (start, cut-over, replay-to, cut-back) are mode changes
// compared-and-swapped on the mode's epoch and, where it matters, on the
// store's revision. A cut-over or cut-back first holds writes on every
// member (a replicated hold), lets the admitted ones finish (each member
// reports it through the log), brings the replay level, and switches; past
// its timeout it is abandoned and the held writes go on as before.
package mirror
