package mvcc

import (
	"context"
	"encoding/binary"
	"hash/crc32"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// HashKV returns a CRC-32C over every key-value live at rev (0: current):
// key, value, create_revision, mod_revision, version and lease, in key order.
// Two stores hold the same data at a revision exactly when their hashes
// match (up to CRC collisions). It also returns the revision hashed and the
// compacted revision.
func (s *Store) HashKV(ctx context.Context, rev int64) (uint32, int64, int64, error) {
	snap, cur, err := s.readView()
	if err != nil {
		return 0, 0, 0, err
	}
	defer snap.Close()
	at, err := s.checkRev(rev, cur)
	if err != nil {
		return 0, 0, 0, err
	}
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	var buf []byte
	emit := func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, kv, err := decodeRecord(k, v, false)
		if err != nil {
			return err
		}
		buf = HashKeyValue(buf[:0], kv)
		h.Write(buf)
		return nil
	}
	if at == cur {
		err = scanLive(snap, []byte{0}, []byte{0}, emit)
	} else {
		err = scanHistory(snap, []byte{0}, []byte{0}, at, emit)
	}
	return h.Sum32(), at, s.CompactedRev(), err
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
