package mvcc

import (
	"errors"
	"fmt"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Event is one change as watchers see it.
type Event struct {
	Type mvccpb.Event_EventType
	KV   *mvccpb.KeyValue
	// Prev is the key's key-value before the change (nil for a create).
	Prev *PrevKV
}

// PrevKV is an event's previous key-value. Its metadata is known when the
// change is applied (the index has it); its value is read from the key's
// history entry only when a watcher that asked for prev_kv is sent the
// event, once for every watcher of the event (etcd reads prev_kv in its
// watch sender too). So the committer never reads a value to write a put
// or a delete, and events nobody wants with their previous value cost
// nothing more.
//
// Invariant: the history entry at the previous mod revision exists for as
// long as the event's revision is above the compacted revision (compaction
// keeps, of every key, its newest entry at or below the compacted revision
// and every newer one). A watcher sent the event later than a compaction
// past it is canceled with the compacted revision (errPrevCompacted), as
// one that fell behind a compaction while catching up is.
type PrevKV struct {
	meta *mvccpb.KeyValue // without value; never changed
	once sync.Once
	kv   *mvccpb.KeyValue
	err  error
}

// errPrevCompacted means an event's previous value was compacted away
// before the event was sent.
var errPrevCompacted = errors.New("mvcc: the previous value of an event was compacted before it was sent")

// newPrevKV returns prev (a live entry read by the writer: its metadata,
// with its value if one was read) as an event's PrevKV; nil for nil. A
// value already read is used as it is; otherwise load reads it.
func newPrevKV(prev *mvccpb.KeyValue) *PrevKV {
	if prev == nil {
		return nil
	}
	p := &PrevKV{meta: prev}
	if prev.Value != nil {
		p.once.Do(func() { p.kv = prev })
	}
	return p
}

// loadedPrevKV is a PrevKV whose value is at hand (catch-up reads it with
// the event).
func loadedPrevKV(kv *mvccpb.KeyValue) *PrevKV {
	p := &PrevKV{meta: kv}
	p.once.Do(func() { p.kv = kv })
	return p
}

// load returns the previous key-value with its value, reading it from s the
// first time. The result is shared by every watcher sent the event and must
// not be changed.
func (p *PrevKV) load(s *Store) (*mvccpb.KeyValue, error) {
	p.once.Do(func() {
		rec, err := s.get(s.db, historyKey(p.meta.Key, p.meta.ModRevision))
		if err != nil {
			p.err = fmt.Errorf("read the previous value of %q: %w", p.meta.Key, err)
			return
		}
		if rec == nil {
			p.err = errPrevCompacted
			return
		}
		value, err := recordValue(rec)
		if err != nil {
			p.err = fmt.Errorf("decode history of %q: %w", p.meta.Key, err)
			return
		}
		m := p.meta
		kv := &mvccpb.KeyValue{Key: m.Key, CreateRevision: m.CreateRevision, ModRevision: m.ModRevision, Version: m.Version, Lease: m.Lease}
		if len(value) > 0 {
			kv.Value = value // rec is a copy (Store.get)
		}
		p.kv = kv
	})
	return p.kv, p.err
}
