// Package hamove moves a kubeadm control plane of several nodes (stacked
// etcd, one member per node) onto a quantykube store cluster of one member
// per node and back, with the API answering throughout (ADR 202).
//
// The move is a sequence of node steps (Order), each one a journaled,
// crash-safe host command run on one control-plane node
// (`quantykube install|undo store --ha STEP`):
//
//	install: first (one node), join (each other node), switch (each node,
//	         one at a time), cutover (one node, once every API server is on
//	         the store)
//	undo:    stop-etcd (each node), replay-to (one node), restore-etcd (each
//	         node, with the replay-to's snapshot), cutback (one node),
//	         switch-back (each node, one at a time), leave (each node)
//
// Invariants:
//   - etcd is never written by install; its members keep running, untouched,
//     until undo stops them, and undo writes into etcd only after a snapshot
//     of each member was saved and its data dir set aside (never deleted).
//   - At most one API server is restarting at any time: switch and
//     switch-back each restart only the local one and wait for it to be
//     ready before they end; the coordinator runs one at a time.
//   - Every step's journal is its own (<state>/<step>/journal.jsonl) and one
//     lock per node (<state>/lock) serialises the steps on a node: a step
//     interrupted by kill -9 is finished or put back by its rerun, as for
//     every host command (package install).
//   - A step refuses to start unless the cluster is where the step belongs
//     in Order (Status says where it is), with one line that names the step
//     to run instead.
package hamove
