package mvcc

import (
	"bytes"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// watcher is one watch of a stream. Its filter fields are fixed at creation;
// nextRev and lastSent are owned as watch.go says (by the holder of hub.mu
// while synced, by the sync loop while unsynced).
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
	// dropped is set when the stream canceled the watcher because the
	// previous value of an event it was due was compacted away (Next):
	// responses for it still queued are not sent.
	dropped atomic.Bool
}

// matches reports whether key is in the watcher's range: the single key when
// end is empty, every key from key on when end is "\x00", else [key, end).
func (w *watcher) matches(key []byte) bool {
	if len(w.end) == 0 {
		return bytes.Equal(key, w.key)
	}
	if bytes.Compare(key, w.key) < 0 {
		return false
	}
	return (len(w.end) == 1 && w.end[0] == 0) || bytes.Compare(key, w.end) < 0
}

// wants reports whether ev is for the watcher: in its range, of a type it
// did not filter out, and not before nextRev (not yet delivered).
func (w *watcher) wants(ev *Event) bool {
	if ev.Type == mvccpb.PUT && w.noPut || ev.Type == mvccpb.DELETE && w.noDelete {
		return false
	}
	return ev.KV.ModRevision >= w.nextRev && w.matches(ev.KV.Key)
}

// toProto returns ev as the watcher is sent it. When the watcher asked for
// prev_kv and the change had a previous key-value, a fill is added to fills:
// the stream's Next sets the event's PrevKv from it before sending.
func (w *watcher) toProto(ev *Event, fills *[]prevFill) *mvccpb.Event {
	out := &mvccpb.Event{Type: ev.Type, Kv: ev.KV}
	if w.prevKV && ev.Prev != nil {
		*fills = append(*fills, prevFill{ev: out, prev: ev.Prev})
	}
	return out
}
