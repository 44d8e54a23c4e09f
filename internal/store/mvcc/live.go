package mvcc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Reading the live keyspace.
//
// A live entry l/<key> holds the key's metadata only (create and mod
// revision, version, lease); its value is stored once, in the key's history
// entry h/<key>/<mod> (store format 2, docs/adr/011). A read of values
// therefore pairs each live key with one history lookup, done by one
// iterator whose seeks only move forward (the history is in key order too),
// so a range costs one pass over the history of its keys.
//
// Where the metadata comes from: the index of live keys when the reader
// has the index's view at its own revision (indexView: no pebble read at
// all for keys_only, count, or the metadata of a value read), else the l/
// entries of the reader's pebble view. Both hold the same at one revision
// (index.go's invariant).
//
// A format-1 live entry still carries the value as well; readers ignore it
// and read the history entry, which format 1 wrote too.

// entry is one key as a scan reads it: its metadata and, when the scan was
// asked for values, its value. key and value are buffers valid only until
// the entryFunc returns, unless keyOwned (key was made for this entry).
type entry struct {
	key                         []byte
	keyOwned                    bool
	typ                         byte
	create, mod, version, lease int64
	value                       []byte
}

// entryFunc receives the entries of a scan, in key order.
type entryFunc func(e *entry) error

// decode sets e from key and a record (live or history entry); the value
// inside rec, if any, is not taken.
func (e *entry) decode(key, rec []byte) error {
	if len(rec) < 5 {
		return fmt.Errorf("decode %q: %w", key, errBadRecord)
	}
	e.key, e.keyOwned, e.typ, e.value = key, false, rec[0], nil
	b := rec[1:]
	for _, f := range []*int64{&e.create, &e.mod, &e.version, &e.lease} {
		v, n := binary.Varint(b)
		if n <= 0 {
			return fmt.Errorf("decode %q: %w", key, errBadRecord)
		}
		*f, b = v, b[n:]
	}
	return nil
}

// fromMeta sets e from an index entry.
func (e *entry) fromMeta(m *keyMeta) {
	*e = entry{key: []byte(m.key), keyOwned: true, typ: recordPut, create: m.create, mod: m.mod, version: m.version, lease: m.lease}
}

// keyValue returns the entry as a KeyValue that owns its bytes; the value
// is left out when keysOnly.
func (e *entry) keyValue(keysOnly bool) *mvccpb.KeyValue {
	key := e.key
	if !e.keyOwned {
		key = append([]byte(nil), key...)
	}
	kv := &mvccpb.KeyValue{Key: key, CreateRevision: e.create, ModRevision: e.mod, Version: e.version, Lease: e.lease}
	if !keysOnly && len(e.value) > 0 {
		kv.Value = append([]byte(nil), e.value...)
	}
	return kv
}

// liveBounds returns the l/ iteration bounds for an etcd key range.
func liveBounds(key, end []byte) (lower, upper []byte) {
	lower = liveKey(key)
	switch {
	case len(end) == 0:
		upper = append(liveKey(key), 0)
	case len(end) == 1 && end[0] == 0:
		upper = []byte{prefixLive + 1}
	default:
		upper = liveKey(end)
	}
	return lower, upper
}

// errNoHistoryEntry means a live key's history entry at its mod revision is
// missing: the data dir was changed under the store or is damaged.
var errNoHistoryEntry = errors.New("mvcc: a live key has no history entry at its mod revision; the data dir is damaged (restore it from a backup)")

// scanLive calls emit for every live key of the etcd range [key, end) in r,
// in key order; with values set, each with its value. iv, if not nil, is
// the index at r's revision: the keys and metadata then come from it.
func scanLive(r pebble.Reader, iv *indexView, key, end []byte, values bool, emit entryFunc) error {
	if len(end) == 0 {
		return getLive(r, iv, key, values, emit)
	}
	var hist *historyReader
	if values {
		var err error
		hl, hu := historyBounds(key, end)
		if hist, err = newHistoryReader(r, hl, hu); err != nil {
			return err
		}
		defer hist.close()
	}
	if iv != nil {
		return scanIndex(iv, hist, key, end, emit)
	}
	lower, upper := liveBounds(key, end)
	it, err := newBoundedIter(r, lower, upper)
	if err != nil || it == nil {
		return err
	}
	defer it.Close()
	var e entry
	for ok := it.First(); ok; ok = it.Next() {
		rec, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := e.decode(it.Key()[1:], rec); err != nil {
			return err
		}
		if values {
			if e.value, err = hist.valueAt(e.key, e.mod); err != nil {
				return err
			}
		}
		if err := emit(&e); err != nil {
			return err
		}
	}
	return it.Error()
}

// getLive is scanLive for a single key: its metadata from the index (or one
// point lookup of its live entry) and, with values, one point lookup of its
// history entry.
func getLive(r pebble.Reader, iv *indexView, key []byte, values bool, emit entryFunc) error {
	var e entry
	if iv != nil {
		m := iv.get(key)
		if m == nil {
			return nil
		}
		e.fromMeta(m)
	} else {
		rec, closer, err := r.Get(liveKey(key))
		if errors.Is(err, pebble.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		err = e.decode(key, rec)
		closer.Close()
		if err != nil {
			return err
		}
	}
	if !values {
		return emit(&e)
	}
	hrec, closer, err := r.Get(historyKey(key, e.mod))
	if errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("%q at revision %d: %w", key, e.mod, errNoHistoryEntry)
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	if e.value, err = recordValue(hrec); err != nil {
		return fmt.Errorf("decode history of %q: %w", key, err)
	}
	return emit(&e)
}

// scanIndex is scanLive over the index's keys (hist: nil without values).
func scanIndex(iv *indexView, hist *historyReader, key, end []byte, emit entryFunc) error {
	var err error
	var e entry
	iv.ascend(key, end, func(m *keyMeta) bool {
		e.fromMeta(m)
		if hist != nil {
			if e.value, err = hist.valueAt(e.key, e.mod); err != nil {
				return false
			}
		}
		err = emit(&e)
		return err == nil
	})
	return err
}

// historyReader looks up the values of live keys visited in key order: an
// iterator over the history that only moves forward. The entry wanted next
// is usually a few entries on from where the iterator stands — right after
// it when every key has one entry (after a load, or a compaction), after
// the older entries of the key just read otherwise — so it first steps with
// Next, which moves one level's iterator, and seeks only when that fails: a
// SeekGE repositions every level of pebble's merging iterator (seekGE 33 %
// of the store's CPU in a paged range of 100,000 keys, 6 December).
type historyReader struct {
	it  *pebble.Iterator
	buf []byte
	// at is set while it stands on an entry before every key still to be
	// asked for (the last one found), so stepping forward can reach them.
	at bool
}

// historyNextSteps is how many entries valueAt steps over before it seeks.
const historyNextSteps = 4

func newHistoryReader(r pebble.Reader, lower, upper []byte) (*historyReader, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	return &historyReader{it: it}, nil
}

// valueAt returns the value of key at mod revision mod: the value part of
// its history entry there (pebble's buffer, valid until the next call).
// Keys must be asked for in increasing order.
func (h *historyReader) valueAt(key []byte, mod int64) ([]byte, error) {
	h.buf = append(escapeKey(append(h.buf[:0], prefixHistory), key), 0, 0, 0, 0, 0, 0, 0, 0)
	putInvertedRev(h.buf[len(h.buf)-8:], mod)
	if !h.find(h.buf) {
		if err := h.it.Error(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%q at revision %d: %w", key, mod, errNoHistoryEntry)
	}
	hrec, err := h.it.ValueAndErr()
	if err != nil {
		return nil, err
	}
	value, err := recordValue(hrec)
	if err != nil {
		return nil, fmt.Errorf("decode history of %q: %w", key, err)
	}
	return value, nil
}

// find positions the iterator on the entry whose key is target and reports
// whether there is one. target is above every key found before.
func (h *historyReader) find(target []byte) bool {
	if h.at {
		for range historyNextSteps {
			if !h.it.Next() {
				break
			}
			switch c := bytes.Compare(h.it.Key(), target); {
			case c == 0:
				return true
			case c > 0:
				h.at = false // it may stand on the key asked for next
				return false // passed where it would be: there is none
			}
		}
	}
	ok := h.it.SeekGE(target)
	found := ok && bytes.Equal(h.it.Key(), target)
	h.at = found
	return found
}

func (h *historyReader) close() { _ = h.it.Close() }
