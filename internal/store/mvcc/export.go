package mvcc

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Export is a read-only view of the whole store at one instant, for backups
// (etcd-format snapshots): the key-values the compacted revision still
// shows, every change above it, and the leases. It reads one pebble snapshot:
// writers are never blocked by it, and nothing it returns changes while it is
// open, however long the backup takes. Close releases the snapshot.
//
// Invariants, all of the same pebble snapshot:
//   - Rev is the store's current revision and Compacted its compacted
//     revision (m/rev and m/compacted).
//   - Base and Changes together hold every state a read at or above
//     Compacted can reach: Base the keys live at Compacted, Changes every put
//     and delete after it, in revision order. Replaying Changes over Base
//     gives the live keyspace at Rev.
//   - LastChange is the main revision of the newest change (0 if none). It
//     is at most Rev; it is below Rev only when the newest revisions changed
//     no key (SetRevision, or a replayed delete of a key the store never had).
type Export struct {
	s      *Store
	snap   *pebble.Snapshot
	closed bool
	// Rev and Compacted are the current and compacted revision of the view.
	Rev, Compacted int64
	// Taken is when the view was taken; lease time left is measured from it.
	Taken time.Time
}

// Change is one put or delete above the compacted revision. KV.ModRevision is
// its main revision; for a delete KV holds only the key and that revision.
type Change struct {
	Type mvccpb.Event_EventType
	KV   *mvccpb.KeyValue
	// Sub orders the changes of one revision (a transaction), from 0.
	Sub int64
}

// Export opens a consistent view of the store. The store's Close waits for
// every open view to be closed; once Close has begun, Export returns
// ErrClosed and the views' methods stop with ErrClosed.
func (s *Store) Export() (*Export, error) {
	if !s.exportMu.TryRLock() {
		return nil, ErrClosed
	}
	snap, rev, err := s.readView()
	if err != nil {
		s.exportMu.RUnlock()
		return nil, err
	}
	compacted, err := s.getInt(snap, metaCompacted)
	if err != nil {
		snap.Close()
		s.exportMu.RUnlock()
		return nil, err
	}
	return &Export{s: s, snap: snap, Rev: rev, Compacted: compacted, Taken: s.opts.Now()}, nil
}

// stopped returns the reason to stop iterating, if any: ctx ended or the
// store is closing.
func (e *Export) stopped(ctx context.Context) error {
	select {
	case <-e.s.stopc:
		return ErrClosed
	default:
		return ctx.Err()
	}
}

// Dir is the store's data directory.
func (s *Store) Dir() string { return s.dir }

// Close releases the view. It is not safe for concurrent use; a second
// Close does nothing.
func (e *Export) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	err := e.snap.Close()
	e.s.exportMu.RUnlock()
	return err
}

// Base calls fn, in key order, with every key live at the compacted revision
// (its newest put at or below it), or with nothing when the store was never
// compacted. fn must not keep kv's slices past its return.
func (e *Export) Base(ctx context.Context, fn func(kv *mvccpb.KeyValue) error) error {
	if e.Compacted <= 0 {
		return nil
	}
	emit := func(en *entry) error {
		if err := e.stopped(ctx); err != nil {
			return err
		}
		return fn(en.keyValue(false))
	}
	if e.Compacted == e.Rev {
		return scanLive(e.snap, nil, []byte{0}, []byte{0}, true, emit)
	}
	return scanHistory(e.snap, []byte{0}, []byte{0}, e.Compacted, true, emit)
}

// Changes calls fn with every put and delete above the compacted revision,
// in (revision, sub-revision) order, and returns the newest main revision
// seen (0 if none): the events a watch from Compacted+1 replays.
func (e *Export) Changes(ctx context.Context, fn func(c Change) error) (int64, error) {
	it, err := e.snap.NewIter(&pebble.IterOptions{LowerBound: eventKey(e.Compacted+1, 0), UpperBound: []byte{prefixEvent + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	// One history iterator for every lookup: much cheaper than a Get each.
	hist, err := e.snap.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixHistory}, UpperBound: []byte{prefixHistory + 1}})
	if err != nil {
		return 0, err
	}
	defer hist.Close()
	var last int64
	for ok := it.First(); ok; ok = it.Next() {
		if err := e.stopped(ctx); err != nil {
			return last, err
		}
		rev, sub := decodeEventKey(it.Key())
		if rev > e.Rev {
			break // cannot happen in one snapshot; kept as a bound
		}
		key := append([]byte(nil), it.Value()...)
		c, err := change(hist, key, rev, sub)
		if err != nil {
			return last, err
		}
		if err := fn(c); err != nil {
			return last, err
		}
		last = rev
	}
	return last, it.Error()
}

// change reads key's history entry at rev through hist.
func change(hist *pebble.Iterator, key []byte, rev, sub int64) (Change, error) {
	hk := historyKey(key, rev)
	if !hist.SeekGE(hk) || !bytes.Equal(hist.Key(), hk) {
		if err := hist.Error(); err != nil {
			return Change{}, fmt.Errorf("read history of %q at %d: %w", key, rev, err)
		}
		return Change{}, fmt.Errorf("event %d/%d of %q has no history entry; the data dir is damaged", rev, sub, key)
	}
	v, err := hist.ValueAndErr()
	if err != nil {
		return Change{}, fmt.Errorf("read history of %q at %d: %w", key, rev, err)
	}
	typ, kv, err := decodeRecord(key, v, false)
	if err != nil {
		return Change{}, fmt.Errorf("decode history of %q at %d: %w", key, rev, err)
	}
	if typ == recordDelete {
		return Change{Type: mvccpb.DELETE, KV: &mvccpb.KeyValue{Key: key, ModRevision: rev}, Sub: sub}, nil
	}
	return Change{Type: mvccpb.PUT, KV: kv, Sub: sub}, nil
}

// Leases calls fn with every lease granted in the view, in ID order, with
// its granted TTL and the time it had left when the view was taken (zero
// for a lease that expired but was not revoked yet). Keys is left empty.
func (e *Export) Leases(fn func(l Lease) error) error {
	it, err := e.snap.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixLease}, UpperBound: []byte{prefixLease + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k, v := it.Key(), it.Value()
		if len(k) != 9 || len(v) != 16 {
			return fmt.Errorf("malformed lease record %q; the data dir is damaged", k)
		}
		expiry := time.Unix(0, int64(binary.BigEndian.Uint64(v[8:])))
		l := Lease{
			ID:         int64(binary.BigEndian.Uint64(k[1:])),
			GrantedTTL: int64(binary.BigEndian.Uint64(v[:8])),
			Remaining:  max(expiry.Sub(e.Taken), 0),
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	return it.Error()
}
