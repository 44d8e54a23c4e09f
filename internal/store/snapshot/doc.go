// Package snapshot writes and reads backups in etcd's own snapshot format, so
// that etcd's tools and the store exchange them both ways: `etcdctl snapshot
// save` against the store, `etcdutl snapshot status|restore` on the file, and
// `quantykube store restore` on a file made by etcd or by the store.
//
// # The format (etcd 3.6's backend, as `etcdctl snapshot save` writes it)
//
// A bbolt database followed by the SHA-256 of its bytes (the file's size is
// then 32 more than a multiple of 512, which is how etcd's tools recognise
// the hash). Buckets and encodings are etcd's, written through etcd's own
// schema helpers (go.etcd.io/etcd/server/v3/storage/schema, storage/mvcc):
//
//	key      <main:8 BE>'_'<sub:8 BE>     → mvccpb.KeyValue (key, value, create, mod, version, lease)
//	         <main>'_'<sub>'t'            → mvccpb.KeyValue{Key} (a delete: tombstone)
//	meta     finishedCompactRev, scheduledCompactRev (revision bytes), consistent_index, term,
//	         confState (JSON), storageVersion ("3.6.0")
//	lease    <id:8 BE>                    → leasepb.Lease{ID, TTL, RemainingTTL}
//	auth     authEnabled (0), authRevision (1); authUsers, authRoles: empty
//	cluster  clusterVersion ("3.6.0");  members, members_removed, alarm: empty
//
// The key bucket holds, in revision order, each key live at the compacted
// revision (its newest put at or below it) and every change after it, so
// etcd restored from the file answers a Range at any revision from the
// compacted one to the current one, and a watch from compacted+1, exactly as
// the store did. Sub-revisions at or below the compacted revision are
// renumbered from 0 in key order within each revision (nothing can observe
// their order there); above it they are the store's.
//
// etcd derives its current revision from the file as the larger of the newest
// key-bucket revision and the compacted revision. When the store's newest
// revisions changed no key, the writer adds one empty entry at the store's
// revision: the marker `etcdutl snapshot restore --bump-revision` itself
// writes, which etcd indexes under the empty key no client can read or watch.
// The reader skips it (and etcd's own) and keeps only its revision.
package snapshot
