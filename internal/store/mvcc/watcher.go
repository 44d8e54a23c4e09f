package mvcc

import (
	"bytes"
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

func (w *watcher) toProto(ev *Event) *mvccpb.Event {
	out := &mvccpb.Event{Type: ev.Type, Kv: ev.KV}
	if w.prevKV && ev.PrevKV != nil {
		out.PrevKv = ev.PrevKV
	}
	return out
}
