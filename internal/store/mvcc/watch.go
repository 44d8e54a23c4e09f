package mvcc

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

const (
	// maxQueuedResponses bounds a stream's undelivered responses. A synced
	// watcher whose stream is that far behind falls back to catching up
	// from disk, so a slow client never holds events in memory unbounded.
	maxQueuedResponses = 1024
	// maxCatchUpEvents bounds the events of one catch-up response.
	maxCatchUpEvents = 1000
)

// ProgressWatchID is the watch id of a stream-wide progress notification
// (etcd's clientv3.InvalidWatchID).
const ProgressWatchID = -1

// ErrWatchIDInUse is returned when a client picks a watch id that its stream
// already uses.
var ErrWatchIDInUse = errors.New("mvcc: watch id already in use")

// hub delivers committed events to watchers.
//
// A watcher is either synced — it has been sent every event up to hub.rev
// and gets new ones from notify, inline with the commit — or unsynced, with
// the next revision it needs in nextRev; syncLoop replays those from the
// event log on disk until it catches up, then moves it to synced under
// hub.mu. Everything a stream is sent goes through its one ordered queue,
// filled under hub.mu, so a progress notification never overtakes an event.
type hub struct {
	s        *Store
	mu       sync.Mutex
	rev      int64 // newest revision handed to synced watchers
	synced   map[*watcher]struct{}
	unsynced map[*watcher]struct{}
	kick     chan struct{}
	closed   bool
}

type watcher struct {
	id       int64
	key, end []byte
	prevKV   bool
	noPut    bool
	noDelete bool
	progress bool
	fragment bool
	// nextRev is the first revision not yet delivered.
	nextRev int64
	// startRev is the start revision asked for (0: none); no progress
	// notification is sent below it (etcd's progressIfSync).
	startRev int64
	stream   *WatchStream
	// lastSent is when the watcher was last sent anything (for progress_notify).
	lastSent time.Time
}

func newHub(s *Store) *hub {
	return &hub{s: s, rev: s.Rev(), synced: map[*watcher]struct{}{}, unsynced: map[*watcher]struct{}{}, kick: make(chan struct{}, 1)}
}

func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
}

func (w *watcher) matches(key []byte) bool {
	if len(w.end) == 0 {
		return bytes.Equal(key, w.key)
	}
	if bytes.Compare(key, w.key) < 0 {
		return false
	}
	return (len(w.end) == 1 && w.end[0] == 0) || bytes.Compare(key, w.end) < 0
}

func (w *watcher) wants(ev *Event) bool {
	if ev.Type == mvccpb.PUT && w.noPut || ev.Type == mvccpb.DELETE && w.noDelete {
		return false
	}
	return ev.KV.ModRevision >= w.nextRev && w.matches(ev.KV.Key)
}

func (w *watcher) toProto(ev *Event) *mvccpb.Event {
	out := &mvccpb.Event{Type: ev.Type, Kv: ev.KV}
	if w.prevKV && ev.PrevKV != nil {
		out.PrevKv = ev.PrevKV
	}
	return out
}

// notify hands the events of a committed group (revisions up to rev) to the
// synced watchers. Called by the committer only.
func (h *hub) notify(rev int64, events []Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	first := h.rev + 1
	h.rev = rev
	if len(events) == 0 || len(h.synced) == 0 {
		for w := range h.synced {
			w.nextRev = max(w.nextRev, rev+1)
		}
		return
	}
	for w := range h.synced {
		var evs []*mvccpb.Event
		for i := range events {
			if w.wants(&events[i]) {
				evs = append(evs, w.toProto(&events[i]))
			}
		}
		if len(evs) == 0 {
			w.nextRev = max(w.nextRev, rev+1)
			continue
		}
		if !w.stream.push(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}, WatchId: w.id, Events: evs}, false) {
			// The client is slow: replay from disk later instead of queueing.
			w.nextRev = max(w.nextRev, first)
			delete(h.synced, w)
			h.unsynced[w] = struct{}{}
			h.kickSync()
			continue
		}
		w.lastSent = time.Now()
		w.nextRev = max(w.nextRev, rev+1)
	}
}

// restored moves every watcher to unsynced after a state snapshot replaced
// the data at revision rev: each catches up from the new event log (or is
// canceled as compacted if its next revision is gone).
func (h *hub) restored(rev int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.synced {
		delete(h.synced, w)
		h.unsynced[w] = struct{}{}
	}
	h.rev = rev
	h.kickSync()
}

func (h *hub) kickSync() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// syncLoop catches unsynced watchers up from the event log.
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
// moves it to synced if nothing was committed meanwhile.
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

// WatchStream is one client stream of watches. Responses come out of Next in
// the order they were produced.
type WatchStream struct {
	h *hub

	mu       sync.Mutex
	queue    []*pb.WatchResponse
	signal   chan struct{}
	watchers map[int64]*watcher
	nextID   int64
	closed   bool
	// progressPending is set when a progress request could not be answered
	// because a watcher was catching up.
	progressPending bool
}

// NewWatchStream opens a stream of watches.
func (s *Store) NewWatchStream() *WatchStream {
	return &WatchStream{h: s.hub, signal: make(chan struct{}, 1), watchers: map[int64]*watcher{}}
}

// WatchOptions are the options of a watch.
type WatchOptions struct {
	// ID is the client-chosen watch id; 0 lets the stream choose one.
	ID             int64
	Key, End       []byte
	StartRev       int64
	PrevKV         bool
	NoPut          bool
	NoDelete       bool
	ProgressNotify bool
	// Fragment asks for large responses to be split (see WantsFragments).
	Fragment bool
}

// Watch creates a watch and queues its "created" response. A start revision
// below the compacted revision is canceled with the compacted revision right
// after it is created (as etcd does).
func (ws *WatchStream) Watch(o WatchOptions) (int64, error) {
	h := ws.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return 0, ErrClosed
	}
	id := o.ID
	if id == 0 {
		for ws.watchers[ws.nextID] != nil {
			ws.nextID++
		}
		id = ws.nextID
		ws.nextID++
	} else if ws.watchers[id] != nil {
		ws.mu.Unlock()
		return 0, ErrWatchIDInUse
	}
	w := &watcher{
		id: id, key: o.Key, end: o.End, prevKV: o.PrevKV, noPut: o.NoPut, noDelete: o.NoDelete,
		progress: o.ProgressNotify, fragment: o.Fragment, stream: ws, lastSent: time.Now(), startRev: o.StartRev,
	}
	ws.watchers[id] = w
	ws.mu.Unlock()
	ws.push(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: h.rev}, WatchId: id, Created: true}, true)
	if o.StartRev == 0 || o.StartRev > h.rev {
		w.nextRev = max(o.StartRev, h.rev+1)
		h.synced[w] = struct{}{}
		return id, nil
	}
	w.nextRev = o.StartRev
	h.unsynced[w] = struct{}{}
	h.kickSync()
	return id, nil
}

// WantsFragments reports whether watch id asked for fragmented responses.
func (ws *WatchStream) WantsFragments(id int64) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.watchers[id]
	return w != nil && w.fragment
}

// Reply queues a response built by the API layer (a refused create), in
// order with everything else the stream sends.
func (ws *WatchStream) Reply(r *pb.WatchResponse) { ws.push(r, true) }

// Cancel removes a watch and queues its "canceled" response.
func (ws *WatchStream) Cancel(id int64) bool {
	h := ws.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ws.mu.Lock()
	w := ws.watchers[id]
	if w == nil {
		ws.mu.Unlock()
		return false
	}
	delete(ws.watchers, id)
	ws.mu.Unlock()
	delete(h.synced, w)
	delete(h.unsynced, w)
	ws.push(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: h.rev}, WatchId: id, Canceled: true}, true)
	return true
}

// compacted cancels w because the revisions it needs were compacted.
func (ws *WatchStream) compacted(w *watcher, compactRev, rev int64) {
	ws.mu.Lock()
	delete(ws.watchers, w.id)
	ws.mu.Unlock()
	ws.push(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}, WatchId: w.id, Canceled: true,
		CompactRevision: compactRev, CancelReason: ErrCompacted.Error()}, true)
}

// RequestProgress queues a progress notification (no events, watch id -1)
// at the current revision once every watcher of the stream is synced.
func (ws *WatchStream) RequestProgress() {
	h := ws.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ws.mu.Lock()
	ws.progressPending = true
	ws.mu.Unlock()
	ws.maybeSendDeferredProgress(h.rev)
}

// maybeSendDeferredProgress answers a pending progress request if every
// watcher is synced. Called with hub.mu held.
func (ws *WatchStream) maybeSendDeferredProgress(rev int64) {
	ws.mu.Lock()
	if !ws.progressPending {
		ws.mu.Unlock()
		return
	}
	for _, w := range ws.watchers {
		if !ws.h.progressable(w, rev) {
			ws.mu.Unlock()
			return
		}
	}
	ws.progressPending = false
	n := len(ws.watchers)
	ws.mu.Unlock()
	if n == 0 {
		return // etcd sends nothing to a stream without watchers
	}
	ws.push(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}, WatchId: ProgressWatchID}, true)
}

// NotifyProgress queues a progress notification for every synced watcher
// that asked for progress_notify and was sent nothing for interval, and
// answers a deferred progress request that can be answered now.
func (ws *WatchStream) NotifyProgress(interval time.Duration) {
	h := ws.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ws.maybeSendDeferredProgress(h.rev)
	ws.mu.Lock()
	var due []*watcher
	now := time.Now()
	for _, w := range ws.watchers {
		if h.progressable(w, h.rev) && w.progress && now.Sub(w.lastSent) >= interval {
			due = append(due, w)
		}
	}
	ws.mu.Unlock()
	for _, w := range due {
		ws.push(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: h.rev}, WatchId: w.id}, true)
		w.lastSent = now
	}
}

// progressable reports whether a progress notification at rev may be sent
// for w: it is synced (every event up to rev was queued) and rev is not
// below its start revision — a member restarted behind the cluster must not
// promise a client resuming at a later revision that nothing below it is
// coming. Called with hub.mu held.
func (h *hub) progressable(w *watcher, rev int64) bool {
	_, ok := h.synced[w]
	return ok && rev >= w.startRev
}

// push queues r. Unless force is set, it refuses when the queue is full.
func (ws *WatchStream) push(r *pb.WatchResponse, force bool) bool {
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return true
	}
	if !force && len(ws.queue) >= maxQueuedResponses {
		ws.mu.Unlock()
		return false
	}
	ws.queue = append(ws.queue, r)
	ws.mu.Unlock()
	select {
	case ws.signal <- struct{}{}:
	default:
	}
	return true
}

func (ws *WatchStream) full() bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.queue) >= maxQueuedResponses
}

// Next returns the queued responses, waiting until there is one.
func (ws *WatchStream) Next(ctx context.Context) ([]*pb.WatchResponse, error) {
	for {
		ws.mu.Lock()
		if len(ws.queue) > 0 {
			out := ws.queue
			ws.queue = nil
			ws.mu.Unlock()
			return out, nil
		}
		closed := ws.closed
		ws.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		select {
		case <-ws.signal:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ws.h.s.stopc:
			return nil, ErrClosed
		}
	}
}

// Close removes every watch of the stream.
func (ws *WatchStream) Close() {
	h := ws.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, w := range ws.watchers {
		delete(h.synced, w)
		delete(h.unsynced, w)
	}
	ws.watchers = map[int64]*watcher{}
	ws.closed = true
	ws.queue = nil
}
