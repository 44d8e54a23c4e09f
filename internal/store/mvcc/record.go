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

// encodeRecord encodes a key's metadata and value for l/ and h/ entries:
// type, create, mod, version and lease as varints, then the value. The key
// itself lives in the pebble key and is not repeated.
func encodeRecord(typ byte, kv *mvccpb.KeyValue) []byte {
	b := make([]byte, 0, 1+4*binary.MaxVarintLen64+len(kv.Value))
	b = append(b, typ)
	b = binary.AppendVarint(b, kv.CreateRevision)
	b = binary.AppendVarint(b, kv.ModRevision)
	b = binary.AppendVarint(b, kv.Version)
	b = binary.AppendVarint(b, kv.Lease)
	return append(b, kv.Value...)
}

var errBadRecord = errors.New("mvcc: malformed record")

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
