// Package etcdrestore is what both undo flows of the store (one control
// plane: storemove; several: hamove) do to kubeadm's local etcd member and
// to the store's mirror controller to give etcd back the store's keyspace
// with the store's own revisions (docs/adr/005, docs/adr/202):
//
//   - stop the member (its static pod manifest saved, then removed; the
//     port closes) and start it again (the saved manifest put back);
//   - restore its data dir from the store's etcd-format snapshot with
//     etcd's own `etcdutl snapshot restore`, with the member's name, peer
//     URL and cluster token, the old data dir set aside and kept
//     (`<dir>.before-undo-<time>`; only PruneAside, called after an undo
//     committed, removes the oldest of them);
//   - give every restored lease time to be renewed by the replay;
//   - ask the store to replay its later revisions onto etcd, one for one
//     (ReplayTo), and to cut back (the store becomes a mirror of etcd).
//
// Invariant: nothing here writes into etcd through its API; etcd's content
// after a restore is exactly the snapshot's (same keys, create/mod
// revisions, versions and leases, same revision), and every later revision
// is one the store made.
package etcdrestore
