package mvcc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Importer loads an existing keyspace into an empty store with the
// revisions it had elsewhere (etcd's create_revision, mod_revision, version
// and lease), then sets the store's revision. It is how a cluster moves onto
// the store without any resourceVersion changing.
//
// Usage: NewImporter on a store that has never been written, Lease for each
// lease, Put for each key (any order), then Finish(R): the store's current
// and compacted revision become R. History starts at R: a Range at R sees
// exactly the imported keys, one below R returns ErrCompacted, a watch from
// R+1 sees every later change, and the next write gets R+1. Later changes
// made elsewhere are then replayed with ApplyEvents.
//
// Nothing is visible to readers until Finish; the writes are not synced
// until then either, so an import cut short leaves a store to throw away
// (Finish was never recorded and NewImporter refuses to resume on it).
type Importer struct {
	s      *Store
	b      *pebble.Batch
	maxRev int64
	keys   int64
}

// ErrNotEmpty is returned by NewImporter on a store that was written to.
var ErrNotEmpty = errors.New("mvcc: import needs an empty store; use a new data dir")

// NewImporter starts an import. The store must be empty: revision 1, never
// compacted, no key, no lease.
func (s *Store) NewImporter() (*Importer, error) {
	if s.Rev() != 1 || s.CompactedRev() != 0 || len(s.Leases()) != 0 {
		return nil, ErrNotEmpty
	}
	kvs, _, err := s.scan(s.db, scanSpec{key: []byte{0}, end: []byte{0}, rev: 1, cur: 1, limit: 1, keysOnly: true})
	if err != nil {
		return nil, err
	}
	if len(kvs) > 0 {
		return nil, ErrNotEmpty
	}
	return &Importer{s: s, b: s.db.NewBatch()}, nil
}

// Lease imports a lease with its granted TTL and the time it has left.
func (im *Importer) Lease(id, ttl int64, remaining time.Duration) error {
	if id == 0 {
		return errors.New("mvcc: import lease: id 0 is not a lease")
	}
	expiry := im.s.opts.Now().Add(remaining)
	_ = im.b.Set(leaseKey(id), encodeLease(ttl, expiry), nil)
	l := im.s.lessor
	l.mu.Lock()
	l.leases[id] = &lease{id: id, ttl: ttl, expiry: expiry, keys: map[string]struct{}{}}
	l.mu.Unlock()
	return im.flushIfBig()
}

// Put imports one key exactly as given.
func (im *Importer) Put(kv *mvccpb.KeyValue) error {
	if len(kv.Key) == 0 {
		return ErrEmptyKey
	}
	if kv.ModRevision < 1 || kv.CreateRevision < 1 || kv.CreateRevision > kv.ModRevision || kv.Version < 1 {
		return fmt.Errorf("mvcc: import %q: inconsistent revisions (create %d, mod %d, version %d)", kv.Key, kv.CreateRevision, kv.ModRevision, kv.Version)
	}
	_ = im.b.Set(liveKey(kv.Key), encodeMeta(kv), nil)
	_ = im.b.Set(historyKey(kv.Key, kv.ModRevision), encodeRecord(recordPut, kv), nil)
	im.s.lessor.attach(kv.Lease, kv.Key)
	im.maxRev = max(im.maxRev, kv.ModRevision)
	im.keys++
	return im.flushIfBig()
}

func (im *Importer) flushIfBig() error {
	if im.b.Len() < 4<<20 {
		return nil
	}
	if err := im.b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("import: write batch: %w", err)
	}
	im.b = im.s.db.NewBatch()
	return nil
}

// Keys returns the number of keys imported so far.
func (im *Importer) Keys() int64 { return im.keys }

// Finish makes the import durable and visible at revision rev, which must
// be at least every imported mod_revision. The compacted revision becomes
// rev too: history begins at the import.
func (im *Importer) Finish(rev int64) error {
	if rev < im.maxRev {
		return fmt.Errorf("mvcc: import finish at %d: below imported mod_revision %d", rev, im.maxRev)
	}
	if rev < 1 {
		rev = 1
	}
	_ = im.b.Set(metaRev, putInt64(rev), nil)
	_ = im.b.Set(metaCompacted, putInt64(rev), nil)
	// The synced commit also makes every earlier unsynced import batch durable.
	im.s.beginCommit()
	defer im.s.endCommit()
	if err := im.b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("import: finish: %w", err)
	}
	if err := im.s.idx.rebuild(im.s.db, rev); err != nil {
		return fmt.Errorf("import: finish: %w", err)
	}
	im.s.hub.mu.Lock()
	im.s.rev.Store(rev)
	im.s.compacted.Store(rev)
	im.s.hub.rev = rev
	im.s.hub.mu.Unlock()
	return nil
}

// ImportEvent is one change replayed with its original revision.
type ImportEvent struct {
	Type mvccpb.Event_EventType
	// KV is the key-value after a put (with its create_revision, version and
	// lease), or the key and mod_revision of a delete.
	KV *mvccpb.KeyValue
}

// ApplyEvents replays changes made elsewhere, in revision order, with their
// exact revisions; each revision must be above the store's. Changes of one
// revision (a transaction) stay one revision here. Watchers see them as
// ordinary events. The store's revision ends at the last event's revision;
// raise it further with a later ApplyEvents or SetRevision.
func (s *Store) ApplyEvents(ctx context.Context, events []ImportEvent) error {
	if len(events) == 0 {
		return nil
	}
	_, err := s.write(ctx, func(w *writeTxn) (any, error) {
		start := w.rev
		last := start
		for _, ev := range events {
			if ev.KV == nil || len(ev.KV.Key) == 0 {
				return nil, ErrEmptyKey
			}
			r := ev.KV.ModRevision
			if r <= start || r < last {
				return nil, fmt.Errorf("mvcc: apply event %q at revision %d: events must be in order and above the store's revision %d", ev.KV.Key, r, start)
			}
			last = r
		}
		for _, ev := range events {
			r := ev.KV.ModRevision
			if r != w.rev {
				w.rev = r - 1
				w.changes = 0
			}
			prev := w.liveMeta(ev.KV.Key)
			switch ev.Type {
			case mvccpb.PUT:
				w.importPut(ev.KV, prev)
			case mvccpb.DELETE:
				if prev != nil {
					w.del(prev)
				} else {
					w.nextRev() // keep the revision even if the key is unknown here
				}
			}
		}
		return nil, nil
	})
	return err
}

// importPut writes kv exactly as given (revision w.rev after nextRev).
func (w *writeTxn) importPut(kv *mvccpb.KeyValue, prev *mvccpb.KeyValue) {
	rev, sub := w.nextRev()
	kv = &mvccpb.KeyValue{Key: append([]byte(nil), kv.Key...), Value: kv.Value, CreateRevision: kv.CreateRevision,
		ModRevision: rev, Version: kv.Version, Lease: kv.Lease}
	_ = w.b.Set(liveKey(kv.Key), encodeMeta(kv), nil)
	_ = w.b.Set(historyKey(kv.Key, rev), encodeRecord(recordPut, kv), nil)
	_ = w.b.Set(eventKey(rev, sub), kv.Key, nil)
	w.s.idx.set(metaOf(kv))
	var prevLease int64
	if prev != nil {
		prevLease = prev.Lease
	}
	if prevLease != kv.Lease {
		w.s.lessor.detach(prevLease, kv.Key)
		w.s.lessor.attach(kv.Lease, kv.Key)
	}
	w.events = append(w.events, Event{Type: mvccpb.PUT, KV: kv, Prev: newPrevKV(prev)})
}

// SetRevision raises the store's revision to rev without changing any key
// (the source's final revision may be a change the store had no key for).
func (s *Store) SetRevision(ctx context.Context, rev int64) error {
	_, err := s.write(ctx, func(w *writeTxn) (any, error) {
		if rev < w.rev {
			return nil, fmt.Errorf("mvcc: set revision %d: below the store's revision %d", rev, w.rev)
		}
		w.rev = rev
		return nil, nil
	})
	return err
}

// RestoreLease grants lease id with its granted TTL and the time it has
// left, as it was elsewhere (a lease granted at the source after the bulk
// copy). An existing lease with that id is left as it is.
func (s *Store) RestoreLease(ctx context.Context, id, ttl int64, remaining time.Duration) error {
	if id == 0 {
		return errors.New("mvcc: restore lease: id 0 is not a lease")
	}
	l := s.lessor
	_, err := s.write(ctx, func(w *writeTxn) (any, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.leases[id] != nil {
			return nil, nil
		}
		expiry := s.opts.Now().Add(remaining)
		_ = w.b.Set(leaseKey(id), encodeLease(ttl, expiry), nil)
		l.leases[id] = &lease{id: id, ttl: ttl, expiry: expiry, keys: map[string]struct{}{}}
		return nil, nil
	})
	return err
}

// HasLease reports whether lease id is granted.
func (s *Store) HasLease(id int64) bool { return s.lessor.exists(id) }
