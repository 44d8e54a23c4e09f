package mvcc

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// writeTxn is the committer's view while it evaluates one request of a group:
// reads go through the group's indexed batch, so they see every earlier
// request of the group and the earlier operations of this request.
type writeTxn struct {
	s *Store
	b *pebble.Batch
	// rev is the revision of the newest change in the batch (the store's
	// revision before the group, if none).
	rev int64
	// changes counts the changes of the current request; the first one raises
	// rev, each one takes the next sub-revision.
	changes int64
	events  []Event
	// afterCommit runs once the group is durable (lease bookkeeping).
	afterCommit []func()
	// compacting is the highest compaction applied in this group, not yet
	// published in s.compacted.
	compacting int64
}

func (w *writeTxn) begin() {
	w.changes = 0
	w.events = w.events[:0]
}

// nextRev returns the (main, sub) revision of the next change of the request.
func (w *writeTxn) nextRev() (int64, int64) {
	if w.changes == 0 {
		w.rev++
	}
	sub := w.changes
	w.changes++
	return w.rev, sub
}

// currentRev is the revision reads inside the request observe.
func (w *writeTxn) currentRev() int64 { return w.rev }

// live returns the live key-value of key with its value, or nil: the
// metadata from the index, the value from the key's history entry through
// the batch. Only what needs the value reads it (prev_kv asked for in the
// request, ignore_value, a compare of values); events get theirs lazily.
func (w *writeTxn) live(key []byte) (*mvccpb.KeyValue, error) {
	kv := w.liveMeta(key)
	if kv == nil {
		return nil, nil
	}
	if err := w.loadValue(kv); err != nil {
		return nil, err
	}
	return kv, nil
}

// loadValue sets kv.Value (kv holds a live key's metadata) from the key's
// history entry at its mod revision, as the batch sees it.
func (w *writeTxn) loadValue(kv *mvccpb.KeyValue) error {
	rec, err := w.s.get(w.b, historyKey(kv.Key, kv.ModRevision))
	if err != nil {
		return err
	}
	if rec == nil {
		return fmt.Errorf("%q at revision %d: %w", kv.Key, kv.ModRevision, errNoHistoryEntry)
	}
	value, err := recordValue(rec)
	if err != nil {
		return fmt.Errorf("decode history of %q: %w", kv.Key, err)
	}
	if len(value) > 0 {
		kv.Value = value // rec is a copy (Store.get)
	}
	return nil
}

// liveMeta returns the metadata of key's live entry (no value), or nil,
// from the index alone.
func (w *writeTxn) liveMeta(key []byte) *mvccpb.KeyValue {
	if m := w.s.idx.get(key); m != nil {
		return m.kv()
	}
	return nil
}

// put writes key=value with lease. prev is the key's live entry (nil if
// absent: its metadata, with or without its value), as the caller already
// read it. It returns the new key-value. The value is written once, in the
// history entry; the live entry holds the metadata (live.go).
func (w *writeTxn) put(key, value []byte, lease int64, prev *mvccpb.KeyValue) *mvccpb.KeyValue {
	rev, sub := w.nextRev()
	kv := &mvccpb.KeyValue{Key: key, Value: value, ModRevision: rev, Version: 1, CreateRevision: rev, Lease: lease}
	if prev != nil {
		kv.CreateRevision = prev.CreateRevision
		kv.Version = prev.Version + 1
	}
	w.setLive(kv)
	w.setHistory(kv, rev)
	_ = w.b.Set(eventKey(rev, sub), key, nil)
	w.s.idx.set(metaOf(kv))
	var prevLease int64
	if prev != nil {
		prevLease = prev.Lease
	}
	if prevLease != lease {
		w.s.lessor.detach(prevLease, key)
		w.s.lessor.attach(lease, key)
	}
	w.events = append(w.events, Event{Type: mvccpb.PUT, KV: kv, Prev: newPrevKV(prev)})
	return kv
}

// setLive writes kv's live entry (its metadata) straight into the batch.
func (w *writeTxn) setLive(kv *mvccpb.KeyValue) {
	op := w.b.SetDeferred(1+len(kv.Key), recordLen(kv, false))
	finishDeferred(op, append(append(op.Key[:0], prefixLive), kv.Key...), appendRecord(op.Value[:0], recordPut, kv, false))
}

// setHistory writes kv's history entry at rev, value included, straight
// into the batch: the 1 KiB of a typical value is copied once, not encoded
// into a buffer first (and that buffer collected).
func (w *writeTxn) setHistory(kv *mvccpb.KeyValue, rev int64) {
	op := w.b.SetDeferred(historyKeyLen(kv.Key), recordLen(kv, true))
	finishDeferred(op, appendHistoryKey(op.Key[:0], kv.Key, rev), appendRecord(op.Value[:0], recordPut, kv, true))
}

// finishDeferred finishes a deferred batch operation whose key and value were
// appended in place; an encoder that appended another length than it
// declared is a bug that would corrupt the batch, so it panics.
func finishDeferred(op *pebble.DeferredBatchOp, key, value []byte) {
	if len(key) != len(op.Key) || len(value) != len(op.Value) || &key[0] != &op.Key[0] || (len(value) > 0 && &value[0] != &op.Value[0]) {
		panic(fmt.Sprintf("mvcc: deferred batch op: wrote %d/%d bytes of a %d/%d-byte entry", len(key), len(value), len(op.Key), len(op.Value)))
	}
	_ = op.Finish()
}

// del deletes the live key prev.Key (prev: its live entry, with or without
// its value).
func (w *writeTxn) del(prev *mvccpb.KeyValue) {
	rev, sub := w.nextRev()
	tomb := &mvccpb.KeyValue{Key: prev.Key, ModRevision: rev}
	_ = w.b.Delete(liveKey(prev.Key), nil)
	w.s.idx.remove(prev.Key)
	_ = w.b.Set(historyKey(prev.Key, rev), encodeRecord(recordDelete, tomb), nil)
	_ = w.b.Set(eventKey(rev, sub), prev.Key, nil)
	w.s.lessor.detach(prev.Lease, prev.Key)
	w.events = append(w.events, Event{Type: mvccpb.DELETE, KV: tomb, Prev: newPrevKV(prev)})
}

// liveEntries returns the live keys of [key, end) as the batch sees them:
// with their values only when values is set (the index alone otherwise).
func (w *writeTxn) liveEntries(key, end []byte, values bool) ([]*mvccpb.KeyValue, error) {
	if values {
		return w.liveRange(key, end)
	}
	return w.liveMetas(key, end), nil
}

// liveRange returns the live key-values of [key, end) as the batch sees them,
// with their values. A range the index shows empty is not read.
func (w *writeTxn) liveRange(key, end []byte) ([]*mvccpb.KeyValue, error) {
	iv := w.s.idx.working(w.rev)
	if !iv.any(key, end) {
		return nil, nil
	}
	var kvs []*mvccpb.KeyValue
	err := scanLive(w.b, iv, key, end, true, func(e *entry) error {
		kvs = append(kvs, e.keyValue(false))
		return nil
	})
	return kvs, err
}

// liveMetas returns the live keys of [key, end) with their metadata and
// without values, from the index alone (compares of revisions, version and
// lease). One key (end empty, a transaction's usual compare) is looked up
// with the writer's probe: no view or search key allocated.
func (w *writeTxn) liveMetas(key, end []byte) []*mvccpb.KeyValue {
	if len(end) == 0 {
		if kv := w.liveMeta(key); kv != nil {
			return []*mvccpb.KeyValue{kv}
		}
		return nil
	}
	var kvs []*mvccpb.KeyValue
	w.s.idx.working(w.rev).ascend(key, end, func(m *keyMeta) bool {
		kvs = append(kvs, m.kv())
		return true
	})
	return kvs
}
