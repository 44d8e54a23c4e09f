package mvcc

import (
	"bytes"
	"errors"
	"time"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// syncLoop catches unsynced watchers up from the event log: every 100 ms,
// or at once when kicked. It is the only goroutine that serves an unsynced
// watcher (watch.go).
func (h *hub) syncLoop() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-h.s.stopc:
			return
		case <-t.C:
		case <-h.kick:
		}
		h.syncOnce()
	}
}

// syncOnce runs one round: every watcher unsynced at its start is caught up
// from one pebble snapshot, as far as its stream's queue allows.
func (h *hub) syncOnce() {
	h.mu.Lock()
	ws := make([]*watcher, 0, len(h.unsynced))
	for w := range h.unsynced {
		ws = append(ws, w)
	}
	h.mu.Unlock()
	if len(ws) == 0 {
		return
	}
	snap, rev, err := h.s.readView()
	if err != nil {
		h.s.log.Error("watch catch-up: open snapshot", "err", err)
		return
	}
	defer snap.Close()
	for _, w := range ws {
		h.catchUp(snap, rev, w)
	}
}

// catchUp sends w the events of (w.nextRev .. rev] from the snapshot, then
// moves it to synced if nothing was committed meanwhile. A watcher whose
// next revision was compacted is canceled with the compacted revision, as
// etcd cancels such a watcher. It stops early, to go on next round, when the
// stream's queue is full: a slow client holds at most maxQueuedResponses.
func (h *hub) catchUp(snap *pebble.Snapshot, rev int64, w *watcher) {
	h.mu.Lock()
	if _, ok := h.unsynced[w]; !ok {
		h.mu.Unlock()
		return // canceled meanwhile
	}
	next := w.nextRev
	h.mu.Unlock()

	if compacted := h.s.CompactedRev(); next < compacted {
		h.mu.Lock()
		delete(h.unsynced, w)
		h.mu.Unlock()
		w.stream.compacted(w, compacted, rev)
		return
	}
	for next <= rev {
		if w.stream.full() {
			return // retry on the next round
		}
		evs, fills, last, err := h.s.readEvents(snap, w, next, rev, maxCatchUpEvents)
		if err != nil {
			h.s.log.Error("watch catch-up: read events", "watch", w.id, "err", err)
			return
		}
		if len(evs) > 0 {
			w.stream.pushEvents(queued{resp: &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}, WatchId: w.id, Events: evs}, w: w, fills: fills}, true)
			w.lastSent = time.Now()
		}
		next = last + 1
		h.mu.Lock()
		if _, ok := h.unsynced[w]; !ok {
			h.mu.Unlock()
			return
		}
		w.nextRev = next
		h.mu.Unlock()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.unsynced[w]; !ok {
		return
	}
	if w.nextRev > h.rev {
		delete(h.unsynced, w)
		h.synced[w] = struct{}{}
		w.stream.maybeSendDeferredProgress(h.rev)
	}
}

// readEvents reads the events for w in revisions [from, to], up to about
// limit events (whole revisions only), with the previous values the watcher
// wants to fill (see watcher.toProto), and returns the last revision read.
func (s *Store) readEvents(snap *pebble.Snapshot, w *watcher, from, to int64, limit int) ([]*mvccpb.Event, []prevFill, int64, error) {
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: eventKey(from, 0), UpperBound: eventKey(to+1, 0)})
	if err != nil {
		return nil, nil, 0, err
	}
	defer it.Close()
	// One history iterator for every lookup: much cheaper than one each.
	hist, err := snap.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixHistory}, UpperBound: []byte{prefixHistory + 1}})
	if err != nil {
		return nil, nil, 0, err
	}
	defer hist.Close()
	var evs []*mvccpb.Event
	var fills []prevFill
	last, prevRev := to, int64(0)
	for ok := it.First(); ok; ok = it.Next() {
		rev, _ := decodeEventKey(it.Key())
		if len(evs) >= limit && rev != prevRev {
			last = prevRev
			break
		}
		prevRev = rev
		key := it.Value()
		if !w.matches(key) {
			continue
		}
		ev, err := historyEvent(hist, append([]byte(nil), key...), rev, w.prevKV)
		if err != nil {
			return nil, nil, 0, err
		}
		if w.wants(ev) {
			evs = append(evs, w.toProto(ev, &fills))
		}
	}
	return evs, fills, last, it.Error()
}

// historyEvent rebuilds the event of key at rev from the history keyspace,
// through hist (an iterator over h/), with its previous value when withPrev
// is set.
func historyEvent(hist *pebble.Iterator, key []byte, rev int64, withPrev bool) (*Event, error) {
	hk := historyKey(key, rev)
	if !hist.SeekGE(hk) || !bytes.Equal(hist.Key(), hk) {
		if err := hist.Error(); err != nil {
			return nil, err
		}
		return nil, errors.New("mvcc: event without history entry; the data dir is damaged")
	}
	v, err := hist.ValueAndErr()
	if err != nil {
		return nil, err
	}
	typ, kv, err := decodeRecord(key, v, false)
	if err != nil {
		return nil, err
	}
	ev := &Event{Type: mvccpb.PUT, KV: kv}
	if typ == recordDelete {
		ev.Type = mvccpb.DELETE
		ev.KV = &mvccpb.KeyValue{Key: key, ModRevision: rev}
	}
	if !withPrev {
		return ev, nil
	}
	prefix := hk[:len(hk)-8]
	if hist.Next() && bytes.HasPrefix(hist.Key(), prefix) {
		pv, err := hist.ValueAndErr()
		if err != nil {
			return nil, err
		}
		ptyp, pkv, err := decodeRecord(key, pv, false)
		if err != nil {
			return nil, err
		}
		if ptyp == recordPut {
			ev.Prev = loadedPrevKV(pkv)
		}
	}
	return ev, hist.Error()
}
