package snapshot

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	etcdmvcc "go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// Bounds of one bbolt write transaction: its dirty pages stay in memory
// until it commits (etcd's backend commits every 10,000 writes too).
const (
	batchEntries = 10_000
	batchBytes   = 16 << 20
)

// Writer builds an etcd snapshot file: a bbolt database in etcd 3.6's
// schema (see the package documentation). Changes go in with Put and Delete
// in strictly increasing (revision, sub-revision) order, so bbolt appends;
// leases with Lease; Finish writes the metadata. Writes are committed in
// bounded batches, so memory does not grow with the data. Nothing is synced:
// the file is a temporary one that is streamed (Take) or read back.
type Writer struct {
	db      *bolt.DB
	tx      *boltTx
	pending int
	bytes   int
	// lastMain, lastSub is the newest change written (lastSub -1: none).
	lastMain, lastSub int64
	changes, leases   int64
}

// NewWriter creates the file at path (which must not exist) with every
// bucket etcd 3.6 has.
func NewWriter(path string) (*Writer, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true, NoGrowSync: true, NoFreelistSync: true})
	if err != nil {
		return nil, fmt.Errorf("create snapshot file %s: %w", path, err)
	}
	w := &Writer{db: db, lastSub: -1}
	if err := w.begin(); err != nil {
		db.Close()
		return nil, err
	}
	for _, b := range schema.AllBuckets {
		w.tx.UnsafeCreateBucket(b)
	}
	return w, w.tx.err
}

func (w *Writer) begin() error {
	tx, err := w.db.Begin(true)
	if err != nil {
		return fmt.Errorf("snapshot file: begin write: %w", err)
	}
	w.tx, w.pending, w.bytes = &boltTx{tx: tx}, 0, 0
	return nil
}

func (w *Writer) commit() error {
	if w.tx.err != nil {
		w.tx.tx.Rollback()
		return fmt.Errorf("snapshot file: write: %w", w.tx.err)
	}
	if err := w.tx.tx.Commit(); err != nil {
		return fmt.Errorf("snapshot file: commit: %w", err)
	}
	return nil
}

// add writes one key-bucket entry and commits when the batch is full.
// bbolt keeps value until the commit: the caller must not reuse it.
func (w *Writer) add(main, sub int64, deleted bool, value []byte) error {
	if main < w.lastMain || (main == w.lastMain && sub <= w.lastSub) || main < 1 || sub < 0 {
		return fmt.Errorf("snapshot file: revision %d/%d after %d/%d: changes must come in revision order", main, sub, w.lastMain, w.lastSub)
	}
	w.tx.UnsafeSeqPut(schema.Key, revKey(main, sub, deleted), value)
	w.lastMain, w.lastSub = main, sub
	w.changes++
	return w.wrote(len(value) + 18)
}

// wrote counts an entry of n bytes and commits when the batch is full.
func (w *Writer) wrote(n int) error {
	w.pending++
	w.bytes += n
	if w.tx.err != nil || (w.pending < batchEntries && w.bytes < batchBytes) {
		return w.tx.err
	}
	if err := w.commit(); err != nil {
		return err
	}
	return w.begin()
}

// Put writes a put at (kv.ModRevision, sub).
func (w *Writer) Put(kv *mvccpb.KeyValue, sub int64) error {
	v, err := proto.Marshal(kv)
	if err != nil {
		return fmt.Errorf("snapshot file: encode %q: %w", kv.Key, err)
	}
	return w.add(kv.ModRevision, sub, false, v)
}

// Delete writes a delete of key at (main, sub): etcd's tombstone, whose
// value holds the key alone.
func (w *Writer) Delete(key []byte, main, sub int64) error {
	v, err := proto.Marshal(&mvccpb.KeyValue{Key: key})
	if err != nil {
		return fmt.Errorf("snapshot file: encode delete of %q: %w", key, err)
	}
	return w.add(main, sub, true, v)
}

// Lease writes a lease with its granted TTL and the time it has left, in
// whole seconds rounded up (at least 1: etcd reads 0 as "the full TTL").
func (w *Writer) Lease(id, ttl int64, remaining time.Duration) error {
	left := max(int64(math.Ceil(remaining.Seconds())), 1)
	schema.MustUnsafePutLease(w.tx, &leasepb.Lease{ID: id, TTL: ttl, RemainingTTL: min(left, ttl)})
	w.leases++
	return w.wrote(32)
}

// Meta is what Finish records besides the data.
type Meta struct {
	// Rev is the store's revision; Compacted its compacted revision.
	Rev, Compacted int64
	// MemberID is the one voter of the recorded raft configuration.
	MemberID uint64
}

// Finish records the compacted revision, the consistent index (the
// revision) and term, the raft configuration, the storage, cluster and auth
// versions, and the revision marker when Rev is above every change and the
// compacted revision; then it commits. The Writer takes no more changes.
func (w *Writer) Finish(m Meta) error {
	if m.Rev < w.lastMain || m.Compacted > m.Rev {
		return fmt.Errorf("snapshot file: revision %d, compacted %d: below the newest change %d", m.Rev, m.Compacted, w.lastMain)
	}
	if m.Rev > max(w.lastMain, m.Compacted) && m.Rev > 1 {
		// The marker `etcdutl snapshot restore --bump-revision` writes.
		w.tx.UnsafePut(schema.Key, revKey(m.Rev, 0, false), []byte{})
	}
	if m.Compacted > 0 {
		etcdmvcc.UnsafeSetScheduledCompact(w.tx, m.Compacted)
		etcdmvcc.UnsafeSetFinishedCompact(w.tx, m.Compacted)
	}
	schema.UnsafeUpdateConsistentIndexForce(w.tx, uint64(max(m.Rev, 1)), Term)
	schema.MustUnsafeSaveConfStateToBackend(zap.NewNop(), w.tx, &raftpb.ConfState{Voters: []uint64{m.MemberID}})
	schema.UnsafeSetStorageVersion(w.tx, &StorageVersion)
	w.tx.UnsafePut(schema.Cluster, schema.ClusterClusterVersionKeyName, []byte(ClusterVersion))
	w.tx.UnsafePut(schema.Auth, schema.AuthEnabledKeyName, []byte{0})
	w.tx.UnsafePut(schema.Auth, schema.AuthRevisionKeyName, binary.BigEndian.AppendUint64(nil, 1))
	if err := w.commit(); err != nil {
		return err
	}
	w.tx = nil
	return nil
}

// Size is the number of bytes WriteTo writes (after Finish).
func (w *Writer) Size() (int64, error) {
	var n int64
	err := w.db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n, err
}

// WriteTo writes the finished database, as etcd's server streams its own:
// bbolt's consistent copy of every page in use.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	var n int64
	err := w.db.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(out)
		return err
	})
	return n, err
}

// Close closes the database file (it does not remove it).
func (w *Writer) Close() error {
	if w.tx != nil {
		_ = w.tx.tx.Rollback()
		w.tx = nil
	}
	return w.db.Close()
}
