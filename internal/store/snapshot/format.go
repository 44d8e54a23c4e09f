package snapshot

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/coreos/go-semver/semver"
	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/server/v3/storage/backend"
	etcdmvcc "go.etcd.io/etcd/server/v3/storage/mvcc"
)

// StorageVersion is the etcd storage version the files are written in: etcd
// 3.6 and 3.7 start on it, and `etcdutl snapshot status` reports it.
var StorageVersion = semver.Version{Major: 3, Minor: 6}

// ClusterVersion is the cluster version recorded in the file.
const ClusterVersion = "3.6.0"

// Term is the raft term recorded with the consistent index: the store is
// one member that is always its own leader in term 1.
const Term = 1

// HashSize is the size of the SHA-256 trailer.
const HashSize = sha256.Size

// hasHash reports whether a file of size n ends with the SHA-256 of the
// rest, by etcd's rule: bbolt files are multiples of 512 bytes.
func hasHash(n int64) bool { return n%512 == HashSize }

// tombstone is the mark etcd appends to the revision of a delete.
const tombstone = 't'

// revKey is the key-bucket key of a change at (main, sub).
func revKey(main, sub int64, deleted bool) []byte {
	k := etcdmvcc.RevToBytes(etcdmvcc.Revision{Main: main, Sub: sub}, etcdmvcc.NewRevBytes())
	if deleted {
		k = append(k, tombstone)
	}
	return k
}

var errBadRevision = errors.New("malformed revision")

// parseRevKey decodes a key-bucket key without etcd's panics on bad input.
func parseRevKey(k []byte) (main, sub int64, deleted bool, err error) {
	if (len(k) != 17 && len(k) != 18) || k[8] != '_' || (len(k) == 18 && k[17] != tombstone) {
		return 0, 0, false, fmt.Errorf("%w %x", errBadRevision, k)
	}
	r := etcdmvcc.BytesToRev(k[:17])
	if r.Main < 0 || r.Sub < 0 {
		return 0, 0, false, fmt.Errorf("%w %x", errBadRevision, k)
	}
	return r.Main, r.Sub, etcdmvcc.IsTombstone(k), nil
}

// boltTx lets etcd's schema helpers (schema.*, etcd mvcc's UnsafeSet*) read
// and write a bbolt transaction, as etcd's backend does. Where etcd's backend
// exits the process on a bbolt error, boltTx keeps the first error for the
// caller (err), so a failed backup never takes the store down.
type boltTx struct {
	tx  *bolt.Tx
	err error
}

var _ backend.UnsafeReadWriter = (*boltTx)(nil)

func (b *boltTx) fail(err error) {
	if b.err == nil && err != nil {
		b.err = err
	}
}

func (b *boltTx) bucket(bk backend.Bucket) *bolt.Bucket {
	x := b.tx.Bucket(bk.Name())
	if x == nil {
		b.fail(fmt.Errorf("bucket %q missing", bk.Name()))
	}
	return x
}

func (b *boltTx) UnsafeCreateBucket(bk backend.Bucket) {
	_, err := b.tx.CreateBucketIfNotExists(bk.Name())
	b.fail(err)
}

func (b *boltTx) UnsafeDeleteBucket(bk backend.Bucket) {
	if err := b.tx.DeleteBucket(bk.Name()); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
		b.fail(err)
	}
}

func (b *boltTx) UnsafePut(bk backend.Bucket, key, value []byte) {
	if x := b.bucket(bk); x != nil {
		b.fail(x.Put(key, value))
	}
}

// UnsafeSeqPut is a put of keys that only grow: pages are filled to 90%, as
// etcd's backend does for the key bucket.
func (b *boltTx) UnsafeSeqPut(bk backend.Bucket, key, value []byte) {
	if x := b.bucket(bk); x != nil {
		x.FillPercent = 0.9
		b.fail(x.Put(key, value))
	}
}

func (b *boltTx) UnsafeDelete(bk backend.Bucket, key []byte) {
	if x := b.bucket(bk); x != nil {
		b.fail(x.Delete(key))
	}
}

// UnsafeRange follows etcd's backend: an empty endKey reads key alone.
func (b *boltTx) UnsafeRange(bk backend.Bucket, key, endKey []byte, limit int64) (keys, vals [][]byte) {
	x := b.tx.Bucket(bk.Name())
	if x == nil {
		return nil, nil
	}
	if len(endKey) == 0 {
		if v := x.Get(key); v != nil {
			return [][]byte{key}, [][]byte{v}
		}
		return nil, nil
	}
	c := x.Cursor()
	for k, v := c.Seek(key); k != nil && bytes.Compare(k, endKey) < 0; k, v = c.Next() {
		keys, vals = append(keys, k), append(vals, v)
		if limit > 0 && int64(len(keys)) == limit {
			break
		}
	}
	return keys, vals
}

func (b *boltTx) UnsafeForEach(bk backend.Bucket, visitor func(k, v []byte) error) error {
	if x := b.tx.Bucket(bk.Name()); x != nil {
		return x.ForEach(visitor)
	}
	return nil
}
