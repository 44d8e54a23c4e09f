package mvcc

import (
	"context"
	"encoding/binary"
	"hash/crc32"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// KVDigest is what HashKV reports about the key-values live at a revision.
type KVDigest struct {
	// Hash is a CRC-32C over key, value, create_revision, mod_revision,
	// version and lease of every key, in key order (see HashKeyValue).
	Hash uint32
	// Keys is the number of keys hashed.
	Keys int64
	// Revision is the revision hashed; Compacted the compacted revision.
	Revision, Compacted int64
}

// HashKV digests every key-value live at rev (0: current), in one pass. Two
// stores hold the same data at a revision exactly when their digests match
// (up to CRC collisions).
func (s *Store) HashKV(ctx context.Context, rev int64) (KVDigest, error) {
	snap, cur, err := s.readView()
	if err != nil {
		return KVDigest{}, err
	}
	defer snap.Close()
	at, err := s.checkRev(rev, cur)
	if err != nil {
		return KVDigest{}, err
	}
	var keys int64
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	var buf []byte
	emit := func(e *entry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		buf = HashKeyValue(buf[:0], e.keyValue(false))
		h.Write(buf)
		keys++
		return nil
	}
	if at == cur {
		err = scanLive(snap, s.idx.viewAt(cur), []byte{0}, []byte{0}, true, emit)
	} else {
		err = scanHistory(snap, []byte{0}, []byte{0}, at, true, emit)
	}
	return KVDigest{Hash: h.Sum32(), Keys: keys, Revision: at, Compacted: s.CompactedRev()}, err
}

// HashKeyValue appends the bytes HashKV hashes for kv to dst; callers that
// hash another store's data (such as etcd's, during a move) use it too.
func HashKeyValue(dst []byte, kv *mvccpb.KeyValue) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(kv.Key)))
	dst = append(dst, kv.Key...)
	dst = binary.AppendUvarint(dst, uint64(len(kv.Value)))
	dst = append(dst, kv.Value...)
	dst = binary.AppendVarint(dst, kv.CreateRevision)
	dst = binary.AppendVarint(dst, kv.ModRevision)
	dst = binary.AppendVarint(dst, kv.Version)
	return binary.AppendVarint(dst, kv.Lease)
}
