package mvcc

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// Key prefixes of the pebble keyspace. See the package documentation.
const (
	prefixLive    = 'l'
	prefixHistory = 'h'
	prefixEvent   = 'e'
	prefixMeta    = 'm'
	prefixLease   = 's'
)

var (
	metaRev       = []byte("m/rev")
	metaCompacted = []byte("m/compacted")
	metaFormat    = []byte("m/format")
)

// liveKey is the pebble key holding the live value of key.
func liveKey(key []byte) []byte {
	k := make([]byte, 0, len(key)+1)
	k = append(k, prefixLive)
	return append(k, key...)
}

// escapeKey appends an order-preserving, self-delimiting encoding of key to
// dst: 0x00 becomes 0x00 0xFF and the key ends with 0x00 0x01. For any keys a
// and b, a < b if and only if escape(a) < escape(b), and no escaped key is a
// prefix of another one.
func escapeKey(dst, key []byte) []byte {
	for _, c := range key {
		if c == 0 {
			dst = append(dst, 0, 0xFF)
			continue
		}
		dst = append(dst, c)
	}
	return append(dst, 0, 1)
}

// escapeBound is escapeKey without the terminator: every escaped key strictly
// below bound sorts below it, and escape(bound) itself sorts above it.
func escapeBound(dst, key []byte) []byte {
	e := escapeKey(dst, key)
	return e[:len(e)-2]
}

// historyPrefix is the prefix shared by every history entry of key.
func historyPrefix(key []byte) []byte {
	p := make([]byte, 0, len(key)+12)
	p = append(p, prefixHistory)
	return escapeKey(p, key)
}

// historyKey is the pebble key of key's history entry at main revision rev.
// Revisions are stored inverted so that the newest entry comes first.
func historyKey(key []byte, rev int64) []byte {
	p := historyPrefix(key)
	return binary.BigEndian.AppendUint64(p, ^uint64(rev))
}

// appendHistoryKey appends historyKey(key, rev) to dst: exactly
// historyKeyLen(key) bytes.
func appendHistoryKey(dst, key []byte, rev int64) []byte {
	dst = escapeKey(append(dst, prefixHistory), key)
	return binary.BigEndian.AppendUint64(dst, ^uint64(rev))
}

// historyKeyLen is the length of historyKey(key, rev).
func historyKeyLen(key []byte) int {
	return 1 + len(key) + bytes.Count(key, []byte{0}) + 2 + 8
}

// putInvertedRev writes rev as a history key's 8-byte suffix into dst.
func putInvertedRev(dst []byte, rev int64) { binary.BigEndian.PutUint64(dst, ^uint64(rev)) }

// decodeHistoryKey splits a history key into its user key, its escaped prefix
// (shared by all entries of that key) and its main revision.
func decodeHistoryKey(k []byte) (key, prefix []byte, rev int64, err error) {
	if len(k) < 1+2+8 || k[0] != prefixHistory {
		return nil, nil, 0, errors.New("mvcc: malformed history key")
	}
	prefix = append([]byte(nil), k[:len(k)-8]...)
	rev = int64(^binary.BigEndian.Uint64(k[len(k)-8:]))
	esc := prefix[1 : len(prefix)-2]
	key = make([]byte, 0, len(esc))
	for i := 0; i < len(esc); i++ {
		if esc[i] == 0 {
			if i+1 >= len(esc) || esc[i+1] != 0xFF {
				return nil, nil, 0, errors.New("mvcc: malformed escaped key")
			}
			key = append(key, 0)
			i++
			continue
		}
		key = append(key, esc[i])
	}
	return key, prefix, rev, nil
}

// eventKey is the pebble key of the event at (rev, sub).
func eventKey(rev, sub int64) []byte {
	k := make([]byte, 0, 17)
	k = append(k, prefixEvent)
	k = binary.BigEndian.AppendUint64(k, uint64(rev))
	return binary.BigEndian.AppendUint64(k, uint64(sub))
}

func decodeEventKey(k []byte) (rev, sub int64) {
	return int64(binary.BigEndian.Uint64(k[1:9])), int64(binary.BigEndian.Uint64(k[9:17]))
}

// leaseKey is the pebble key of a granted lease.
func leaseKey(id int64) []byte {
	k := make([]byte, 0, 9)
	k = append(k, prefixLease)
	return binary.BigEndian.AppendUint64(k, uint64(id))
}

// prefixEnd returns the smallest key above every key that starts with p,
// or nil when there is none (p is all 0xFF).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func putInt64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func getInt64(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, errors.New("mvcc: malformed integer")
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}
