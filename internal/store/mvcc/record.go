package mvcc

import (
	"encoding/binary"
	"errors"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Record types of history entries.
const (
	recordPut    byte = 'p'
	recordDelete byte = 'd'
)

// encodeRecord encodes a key's metadata and value for an h/ entry: type,
// create, mod, version and lease as varints, then the value. The key itself
// lives in the pebble key and is not repeated. A live entry (l/) is the same
// record without the value (encodeMeta).
func encodeRecord(typ byte, kv *mvccpb.KeyValue) []byte {
	return appendRecord(make([]byte, 0, recordLen(kv, true)), typ, kv, true)
}

// encodeMeta encodes kv's metadata as its live entry (l/): the record
// without the value. Since store format 2 a value is stored once, in the
// key's history entry at its mod revision; the live entry is what the
// in-memory index is rebuilt from at open (docs/adr/011).
func encodeMeta(kv *mvccpb.KeyValue) []byte {
	return appendRecord(make([]byte, 0, recordLen(kv, false)), recordPut, kv, false)
}

// appendRecord appends kv's record of type typ to dst: with its value, or
// without it (a live entry). It appends exactly recordLen(kv, withValue)
// bytes.
func appendRecord(dst []byte, typ byte, kv *mvccpb.KeyValue, withValue bool) []byte {
	dst = append(dst, typ)
	dst = binary.AppendVarint(dst, kv.CreateRevision)
	dst = binary.AppendVarint(dst, kv.ModRevision)
	dst = binary.AppendVarint(dst, kv.Version)
	dst = binary.AppendVarint(dst, kv.Lease)
	if withValue {
		dst = append(dst, kv.Value...)
	}
	return dst
}

// recordLen is the length of kv's record (appendRecord).
func recordLen(kv *mvccpb.KeyValue, withValue bool) int {
	n := 1 + varintLen(kv.CreateRevision) + varintLen(kv.ModRevision) + varintLen(kv.Version) + varintLen(kv.Lease)
	if withValue {
		n += len(kv.Value)
	}
	return n
}

// varintLen is the length of binary.AppendVarint(nil, v).
func varintLen(v int64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutVarint(buf[:], v)
}

var errBadRecord = errors.New("mvcc: malformed record")

// recordMod returns the mod revision of a record (live or history entry).
func recordMod(b []byte) (int64, error) {
	if len(b) < 5 {
		return 0, errBadRecord
	}
	b = b[1:]
	_, n := binary.Varint(b) // create
	if n <= 0 {
		return 0, errBadRecord
	}
	mod, m := binary.Varint(b[n:])
	if m <= 0 {
		return 0, errBadRecord
	}
	return mod, nil
}

// recordValue returns the value part of a record: what follows the type
// and the four varints (empty for a live entry of format 2). It aliases b.
func recordValue(b []byte) ([]byte, error) {
	if len(b) < 5 {
		return nil, errBadRecord
	}
	b = b[1:]
	for i := 0; i < 4; i++ {
		_, n := binary.Varint(b)
		if n <= 0 {
			return nil, errBadRecord
		}
		b = b[n:]
	}
	return b, nil
}

// decodeRecord decodes a record into a KeyValue for key. When keysOnly is set
// the value is left out. The value is copied: b may be pebble's buffer.
func decodeRecord(key, b []byte, keysOnly bool) (byte, *mvccpb.KeyValue, error) {
	if len(b) < 5 {
		return 0, nil, errBadRecord
	}
	typ := b[0]
	b = b[1:]
	var vals [4]int64
	for i := range vals {
		v, n := binary.Varint(b)
		if n <= 0 {
			return 0, nil, errBadRecord
		}
		vals[i] = v
		b = b[n:]
	}
	kv := &mvccpb.KeyValue{
		Key:            key,
		CreateRevision: vals[0],
		ModRevision:    vals[1],
		Version:        vals[2],
		Lease:          vals[3],
	}
	if !keysOnly && len(b) > 0 {
		kv.Value = append([]byte(nil), b...)
	}
	return typ, kv, nil
}
