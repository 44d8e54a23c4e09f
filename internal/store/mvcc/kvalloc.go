package mvcc

import "go.etcd.io/etcd/api/v3/mvccpb"

// kvAlloc makes the KeyValues of one read in a few large allocations
// instead of three small ones per key (the struct, its key and its value):
// a page of 10,000 keys of 1 KiB is then ~20 allocations, not 30,000, and
// the garbage collector has a few hundred objects to trace, not 30,000
// (paged-range profile, 6 December: mallocgc 18 % of the store's CPU).
//
// Chunks grow geometrically from small, so a one-key read allocates about
// what it did before. Invariant: a KeyValue it returns owns its bytes —
// nothing it made is ever written again — but it shares its chunk with the
// read's other KeyValues, so one of them kept alive keeps its whole chunk:
// kvAlloc is for the results of one read, which live and die together (a
// response, a stream chunk), not for data kept past the request.
type kvAlloc struct {
	kvs   []mvccpb.KeyValue
	bytes []byte
	nkvs  int // size of the next chunk of KeyValues
	nbuf  int // size of the next chunk of bytes
}

const (
	kvAllocMaxKVs   = 1024    // KeyValues a chunk holds at most
	kvAllocMaxBytes = 1 << 20 // bytes a chunk holds at most
	kvAllocFirstBuf = 512     // bytes of the first chunk
)

// keyValue returns e as a KeyValue that owns its bytes; the value is left
// out when keysOnly.
func (a *kvAlloc) keyValue(e *entry, keysOnly bool) *mvccpb.KeyValue {
	if len(a.kvs) == 0 {
		a.nkvs = min(max(2*a.nkvs, 1), kvAllocMaxKVs)
		a.kvs = make([]mvccpb.KeyValue, a.nkvs)
	}
	kv := &a.kvs[0]
	a.kvs = a.kvs[1:]
	*kv = mvccpb.KeyValue{CreateRevision: e.create, ModRevision: e.mod, Version: e.version, Lease: e.lease}
	if e.keyOwned {
		kv.Key = e.key
	} else {
		kv.Key = a.copy(e.key)
	}
	if !keysOnly && len(e.value) > 0 {
		kv.Value = a.copy(e.value)
	}
	return kv
}

// copy returns a copy of b in the current chunk of bytes, capped at its
// length so that no later append through it can reach the next copy.
func (a *kvAlloc) copy(b []byte) []byte {
	if len(b) > kvAllocMaxBytes/4 {
		return append([]byte(nil), b...) // large: its own allocation
	}
	if len(b) > cap(a.bytes)-len(a.bytes) {
		a.nbuf = min(max(2*a.nbuf, kvAllocFirstBuf), kvAllocMaxBytes)
		for a.nbuf < len(b) {
			a.nbuf *= 2
		}
		a.bytes = make([]byte, 0, a.nbuf)
	}
	n := len(a.bytes)
	a.bytes = append(a.bytes, b...)
	return a.bytes[n:len(a.bytes):len(a.bytes)]
}
