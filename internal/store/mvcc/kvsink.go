package mvcc

import "go.etcd.io/etcd/api/v3/mvccpb"

// KVSink receives the key-values of a range in the order of the response
// (RangeTo). It lets a server write them straight into its wire format
// instead of building a KeyValue per key first (issue #15: making the
// KeyValues and marshaling them were a fifth of the store's CPU in a paged
// list of 100,000 keys).
//
// key and value are valid only during AddKV (they may point into pebble's
// blocks): a sink copies what it keeps. value is empty for a keys-only
// range. Reset drops everything added so far: the read starts over (a read
// of the current revision that lost a race with a compaction is retried
// from a snapshot).
type KVSink interface {
	AddKV(key, value []byte, create, mod, version, lease int64)
	Reset()
}

// kvSink is where a scan puts the key-values it reads.
type kvSink interface {
	// add takes e, whose bytes are valid only during the call; its value is
	// left out when keysOnly.
	add(e *entry, keysOnly bool)
	// addKV takes kv, which is owned and never changed.
	addKV(kv *mvccpb.KeyValue)
	// len is the number of key-values added.
	len() int
}

// kvList collects key-values as KeyValues made by one kvAlloc.
type kvList struct {
	kvs   []*mvccpb.KeyValue
	alloc kvAlloc
}

func (l *kvList) add(e *entry, keysOnly bool) {
	l.kvs = append(l.kvs, l.alloc.keyValue(e, keysOnly))
}
func (l *kvList) addKV(kv *mvccpb.KeyValue) { l.kvs = append(l.kvs, kv) }
func (l *kvList) len() int                  { return len(l.kvs) }

// sinkWriter passes the first max key-values added (max < 0: all) to a
// KVSink and counts every one: a range reads one more than its limit to
// learn whether there are more.
type sinkWriter struct {
	sink KVSink
	max  int64
	n    int64
}

func (w *sinkWriter) add(e *entry, keysOnly bool) {
	w.n++
	if w.max >= 0 && w.n > w.max {
		return
	}
	var value []byte
	if !keysOnly {
		value = e.value
	}
	w.sink.AddKV(e.key, value, e.create, e.mod, e.version, e.lease)
}

func (w *sinkWriter) addKV(kv *mvccpb.KeyValue) {
	w.n++
	if w.max >= 0 && w.n > w.max {
		return
	}
	w.sink.AddKV(kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease)
}

func (w *sinkWriter) len() int { return int(w.n) }
