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
		evs, last, err := h.s.readEvents(snap, w, next, rev, maxCatchUpEvents)
		if err != nil {
			h.s.log.Error("watch catch-up: read events", "watch", w.id, "err", err)
			return
		}
		if len(evs) > 0 {
			w.stream.push(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}, WatchId: w.id, Events: evs}, true)
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
// limit events (whole revisions only), and returns the last revision read.
func (s *Store) readEvents(snap *pebble.Snapshot, w *watcher, from, to int64, limit int) ([]*mvccpb.Event, int64, error) {
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: eventKey(from, 0), UpperBound: eventKey(to+1, 0)})
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	var evs []*mvccpb.Event
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
		ev, err := s.historyEvent(snap, append([]byte(nil), key...), rev)
		if err != nil {
			return nil, 0, err
		}
		if w.wants(ev) {
			evs = append(evs, w.toProto(ev))
		}
	}
	return evs, last, it.Error()
}

// historyEvent rebuilds the event of key at rev, with its previous value,
// from the history keyspace.
func (s *Store) historyEvent(r pebble.Reader, key []byte, rev int64) (*Event, error) {
	prefix := historyPrefix(key)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: historyKey(key, rev), UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	if !it.First() {
		return nil, errors.New("mvcc: event without history entry; the data dir is damaged")
	}
	typ, kv, err := decodeRecord(key, it.Value(), false)
	if err != nil {
		return nil, err
	}
	ev := &Event{Type: mvccpb.PUT, KV: kv}
	if typ == recordDelete {
		ev.Type = mvccpb.DELETE
		ev.KV = &mvccpb.KeyValue{Key: key, ModRevision: rev}
	}
	if it.Next() && bytes.HasPrefix(it.Key(), prefix) {
		ptyp, pkv, err := decodeRecord(key, it.Value(), false)
		if err != nil {
			return nil, err
		}
		if ptyp == recordPut {
			ev.PrevKV = pkv
		}
	}
	return ev, it.Error()
}
