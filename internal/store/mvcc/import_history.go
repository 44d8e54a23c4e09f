package mvcc

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// HistoryImporter loads a keyspace with its history into an empty store:
// restoring a backup that holds history, such as an etcd snapshot file,
// replays every change it holds, with its exact revision and sub-revision,
// then FinishAt sets the current and compacted revision the backup had.
// Like Importer (which it uses), nothing is visible or synced before
// FinishAt, and an import cut short leaves a store to throw away.
type HistoryImporter struct {
	im               *Importer
	lastRev, lastSub int64
	keys             int64
}

// NewHistoryImporter starts an import with history. The store must be
// empty, as for NewImporter.
func (s *Store) NewHistoryImporter() (*HistoryImporter, error) {
	im, err := s.NewImporter()
	if err != nil {
		return nil, err
	}
	return &HistoryImporter{im: im, lastSub: -1}, nil
}

// Lease imports a lease with its granted TTL and the time it has left.
func (h *HistoryImporter) Lease(id, ttl int64, remaining time.Duration) error {
	return h.im.Lease(id, ttl, remaining)
}

// Puts returns the number of puts imported so far.
func (h *HistoryImporter) Puts() int64 { return h.keys }

// Change imports one put or delete with its exact revision (kv.ModRevision)
// and sub-revision.
//
// Changes must come in strictly increasing (revision, sub-revision) order.
// A put must carry consistent create_revision, version and lease; a delete
// needs only the key. Each change writes the key's live value (or removes
// it), its history entry and its event, exactly as a write at that revision
// would have. The lessor's key sets are rebuilt by FinishAt, not here.
func (h *HistoryImporter) Change(typ mvccpb.Event_EventType, kv *mvccpb.KeyValue, sub int64) error {
	if kv == nil || len(kv.Key) == 0 {
		return ErrEmptyKey
	}
	rev := kv.ModRevision
	if rev < 1 || sub < 0 {
		return fmt.Errorf("mvcc: import change of %q: revision %d/%d out of range", kv.Key, rev, sub)
	}
	if rev < h.lastRev || (rev == h.lastRev && sub <= h.lastSub) {
		return fmt.Errorf("mvcc: import change of %q at %d/%d: changes must come in revision order (after %d/%d)", kv.Key, rev, sub, h.lastRev, h.lastSub)
	}
	im := h.im
	switch typ {
	case mvccpb.PUT:
		if kv.CreateRevision < 1 || kv.CreateRevision > rev || kv.Version < 1 {
			return fmt.Errorf("mvcc: import %q at %d: inconsistent revisions (create %d, version %d)", kv.Key, rev, kv.CreateRevision, kv.Version)
		}
		_ = im.b.Set(liveKey(kv.Key), encodeMeta(kv), nil)
		_ = im.b.Set(historyKey(kv.Key, rev), encodeRecord(recordPut, kv), nil)
		h.keys++
	case mvccpb.DELETE:
		_ = im.b.Delete(liveKey(kv.Key), nil)
		_ = im.b.Set(historyKey(kv.Key, rev), encodeRecord(recordDelete, &mvccpb.KeyValue{Key: kv.Key, ModRevision: rev}), nil)
	default:
		return fmt.Errorf("mvcc: import change of %q: unknown event type %d", kv.Key, typ)
	}
	_ = im.b.Set(eventKey(rev, sub), kv.Key, nil)
	h.lastRev, h.lastSub = rev, sub
	return im.flushIfBig()
}

// FinishAt makes an import of changes durable and visible: the store's
// revision becomes rev and its compacted revision compacted. History above
// compacted is exactly the imported changes, so a Range at any revision
// from compacted to rev and a watch from compacted+1 answer as the source
// did; below compacted is ErrCompacted. History the compaction made
// unreachable (older entries of a key at or below compacted, imported when
// the source had not finished compacting) is removed before FinishAt
// returns, and the leases' key sets are rebuilt from the live keys.
func (h *HistoryImporter) FinishAt(rev, compacted int64) error {
	im := h.im
	if rev < h.lastRev || compacted > rev || compacted < 0 {
		return fmt.Errorf("mvcc: import finish at revision %d, compacted %d: the revision must be at least the newest change (%d) and the compacted revision", rev, compacted, h.lastRev)
	}
	rev = max(rev, 1)
	_ = im.b.Set(metaRev, putInt64(rev), nil)
	_ = im.b.Set(metaCompacted, putInt64(compacted), nil)
	im.s.beginCommit()
	err := im.b.Commit(pebble.Sync) // also makes every earlier unsynced batch durable
	im.s.endCommit()
	if err == nil {
		err = im.s.idx.rebuild(im.s.db, rev)
	}
	if err != nil {
		return fmt.Errorf("import: finish: %w", err)
	}
	im.s.hub.mu.Lock()
	im.s.rev.Store(rev)
	im.s.compacted.Store(compacted)
	im.s.hub.rev = rev
	im.s.hub.mu.Unlock()
	if compacted > 0 && h.lastRev > 0 {
		if err := im.s.physicalCompact(compacted); err != nil {
			return fmt.Errorf("import: compact imported history to %d: %w", compacted, err)
		}
	}
	return im.s.lessor.reattach()
}

// reattach rebuilds every lease's key set from the live keyspace.
func (l *lessor) reattach() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ls := range l.leases {
		clear(ls.keys)
	}
	return scanLive(l.s.db, nil, []byte{0}, []byte{0}, false, func(e *entry) error {
		if ls := l.leases[e.lease]; e.lease != 0 && ls != nil {
			ls.keys[string(e.key)] = struct{}{}
		}
		return nil
	})
}
