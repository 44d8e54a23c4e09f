package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	etcdmvcc "go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"google.golang.org/protobuf/proto"
)

// Reader reads an etcd snapshot file: one `etcdctl snapshot save` wrote
// (from etcd or from the store), or a copy of an etcd data dir's
// member/snap/db (no hash trailer). Open verifies the file before anything
// is read from it; the file is opened read-only and never changed.
//
// A file with a hash is checked whole by it. Without one, Open checks that
// the file holds every page its database claims; damage inside the pages is
// found while reading (bbolt's panics, and faults on the mapped file, become
// errors), so a reader of a damaged file fails and never crashes.
type Reader struct {
	path string
	db   *bolt.DB
	// Hashed reports whether the file carried a SHA-256 trailer; Open
	// verified it.
	Hashed bool
	// Compacted is the compacted revision the file records: the newer of
	// the finished and the scheduled compaction, as etcd resumes a
	// compaction that was cut short.
	Compacted int64
}

// how is the fix named in every error about the input file.
const how = "pass a file made by `etcdctl snapshot save` (from etcd or quantykube store) or an etcd data dir's member/snap/db"

// Open checks and opens the snapshot file at path. Every error is one line
// that names the problem and the fix.
func Open(path string) (*Reader, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("snapshot file %s does not exist; %s", path, how)
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot file %s cannot be read (%v); check the path and its permissions", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("snapshot file %s is not a regular file; %s", path, how)
	}
	if st.Size() == 0 {
		return nil, fmt.Errorf("snapshot file %s is empty; %s", path, how)
	}
	r := &Reader{path: path, Hashed: hasHash(st.Size())}
	if r.Hashed {
		if err := verifyHash(path, st.Size()); err != nil {
			return nil, err
		}
	}
	size := st.Size()
	if r.Hashed {
		size -= HashSize
	}
	if err := r.open(size); err != nil {
		return nil, err
	}
	return r, nil
}

// verifyHash compares the SHA-256 of the file's first size-32 bytes with
// its last 32 bytes.
func verifyHash(path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("snapshot file %s cannot be read (%v); check its permissions", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, f, size-HashSize); err != nil {
		return fmt.Errorf("snapshot file %s cannot be read (%v); check the disk", path, err)
	}
	want := make([]byte, HashSize)
	if _, err := io.ReadFull(f, want); err != nil {
		return fmt.Errorf("snapshot file %s cannot be read (%v); check the disk", path, err)
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return fmt.Errorf("snapshot file %s is corrupt: its SHA-256 does not match the hash it carries; take a new snapshot or use another copy", path)
	}
	return nil
}

func (r *Reader) open(size int64) (err error) {
	defer recoverTo(&err, r.damaged)
	defer guardFaults()()
	db, err := bolt.Open(r.path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("%s is not an etcd snapshot file (%v); %s", r.path, err, how)
	}
	r.db = db
	err = db.View(func(tx *bolt.Tx) error {
		if tx.Size() > size {
			return fmt.Errorf("snapshot file %s is truncated (%d bytes, its database needs %d); take a new snapshot or use another copy", r.path, size, tx.Size())
		}
		if tx.Bucket(schema.Key.Name()) == nil || tx.Bucket(schema.Meta.Name()) == nil {
			return fmt.Errorf("%s is a bbolt database but not an etcd snapshot (no key and meta buckets); %s", r.path, how)
		}
		btx := &boltTx{tx: tx}
		finished, _ := etcdmvcc.UnsafeReadFinishedCompact(btx)
		scheduled, _ := etcdmvcc.UnsafeReadScheduledCompact(btx)
		r.Compacted = max(finished, scheduled)
		return nil
	})
	if err != nil {
		db.Close()
		r.db = nil
	}
	return err
}

// guardFaults makes a fault on the memory-mapped file (a damaged file whose
// pages point past its end) panic in this goroutine, to be recovered into an
// error, instead of crashing the process. It returns the undo.
func guardFaults() func() {
	old := debug.SetPanicOnFault(true)
	return func() { debug.SetPanicOnFault(old) }
}

// recoverTo turns a panic (bbolt and etcd's decoders panic on damaged
// input) into *err.
func recoverTo(err *error, wrap func(any) error) {
	if v := recover(); v != nil {
		*err = wrap(v)
	}
}

// Close closes the file.
func (r *Reader) Close() error {
	if r.db == nil {
		return nil
	}
	return r.db.Close()
}

// Leases calls fn with every lease in the file, its granted TTL and the
// time it has left: its checkpointed remaining TTL, or else its TTL (what
// etcd grants a lease it restores).
func (r *Reader) Leases(fn func(id, ttl int64, remaining time.Duration) error) (err error) {
	defer recoverTo(&err, r.damaged)
	defer guardFaults()()
	return r.db.View(func(tx *bolt.Tx) error {
		return (&boltTx{tx: tx}).UnsafeForEach(schema.Lease, func(k, v []byte) error {
			var l leasepb.Lease
			if err := proto.Unmarshal(v, &l); err != nil {
				return r.damaged(fmt.Sprintf("lease %x: %v", k, err))
			}
			left := l.RemainingTTL
			if left <= 0 {
				left = l.TTL
			}
			return fn(l.ID, l.TTL, time.Duration(left)*time.Second)
		})
	})
}

func (r *Reader) damaged(v any) error {
	return fmt.Errorf("snapshot file %s is damaged (%v); take a new snapshot or use another copy", r.path, v)
}

// Changes calls fn with every put and delete of the key bucket, in
// revision order (the keys live at the compacted revision, then every
// change after it). A delete's kv holds the key and its revision. Revision
// markers (empty entries, as `etcdutl snapshot restore --bump-revision`
// writes) are skipped. It returns the file's revision, as etcd computes it:
// the newer of the newest key-bucket revision and the compacted revision.
func (r *Reader) Changes(ctx context.Context, fn func(typ mvccpb.Event_EventType, kv *mvccpb.KeyValue, sub int64) error) (rev int64, err error) {
	defer recoverTo(&err, r.damaged)
	defer guardFaults()()
	rev = max(r.Compacted, 1)
	err = r.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(schema.Key.Name()).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			main, sub, deleted, err := parseRevKey(k)
			if err != nil {
				return r.damaged(err)
			}
			rev = max(rev, main)
			kv := &mvccpb.KeyValue{}
			if err := proto.Unmarshal(v, kv); err != nil {
				return r.damaged(fmt.Sprintf("revision %d/%d: %v", main, sub, err))
			}
			if len(kv.Key) == 0 {
				continue // a revision marker
			}
			if deleted {
				err = fn(mvccpb.DELETE, &mvccpb.KeyValue{Key: kv.Key, ModRevision: main}, sub)
			} else if kv.ModRevision != main {
				err = r.damaged(fmt.Sprintf("revision %d/%d holds %q with mod_revision %d", main, sub, kv.Key, kv.ModRevision))
			} else {
				err = fn(mvccpb.PUT, kv, sub)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	return rev, err
}
