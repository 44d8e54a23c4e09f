package mvcc

import "errors"

// Watch delivery (docs/adr/004-watch.md), one concern a file:
//
//	watch.go          this overview, the bounds and the errors
//	watcher.go        one watch: its filter and the events it wants
//	watch_hub.go      the hub: every watcher of the store, synced or unsynced,
//	                  and the inline fan-out of each committed group (notify)
//	watch_catchup.go  the sync loop: catching unsynced watchers up from the
//	                  e/ event log and h/ history on disk
//	watch_stream.go   one client stream: creating and canceling its watches
//	watch_progress.go progress notifications (requested and periodic)
//	watch_queue.go    the stream's one ordered queue of responses, and Next
//
// # Goroutines
//
//   - The committer (commitLoop, or a replicated member's applier) calls
//     hub.notify after each durable group: it fans the group's events out to
//     the synced watchers, inline, and never waits on a client.
//   - The sync loop (hub.syncLoop, one per store) replays history to the
//     unsynced watchers and moves each to synced once it is caught up.
//   - A stream's API goroutines (etcdapi's receiver) call Watch, Cancel,
//     RequestProgress, Reply; its sender calls Next and NotifyProgress. Any
//     number of streams run at once.
//   - Previous values (prev_kv) are read by Next, in the sender, with no
//     lock held: notify and the sync loop queue an event response with the
//     events' PrevKV, and Next reads each once for every watcher of the
//     event (event.go, watch_queue.go). Neither the committer nor the sync
//     loop reads a value for a watcher.
//
// # Lock order
//
//	hub.mu  before  WatchStream.mu
//
// A goroutine that holds a stream's mu never takes hub.mu (Next's
// cancelBehind takes hub.mu, then mu, holding neither before). Neither lock is
// held while reading pebble: the sync loop reads events with no lock and takes
// hub.mu only to check and advance a watcher between reads. Neither is held
// while waiting on a client: push never blocks, and Next waits on the stream's
// signal channel with no lock.
//
// # Who owns what
//
//   - hub.rev, hub.synced, hub.unsynced, hub.closed: hub.mu.
//   - A watcher's id, filter, options and stream: set before the watcher is
//     published (in Watch, under hub.mu) and never written again.
//   - watcher.nextRev and watcher.lastSent belong to whoever serves the
//     watcher's current set. While it is synced: the holder of hub.mu (the
//     committer in notify, Watch, NotifyProgress). While it is unsynced: the
//     sync loop alone — nothing else writes them then (notify touches only
//     synced watchers), so the sync loop reads them without the lock between
//     reads of disk and writes nextRev under hub.mu. The move from one set to
//     the other happens under hub.mu, which orders the two owners.
//   - WatchStream.queue, watchers, nextID, closed, progressPending: the
//     stream's mu. ws.h and ws.signal are set at creation.
//
// # Ordering
//
// A watcher gets its events in revision order, each once: it is in exactly one
// of synced or unsynced; notify feeds only synced ones, the sync loop only
// unsynced ones, and a watcher moves to synced only when its nextRev is past
// hub.rev, checked under hub.mu, so no committed group falls between the two.
// Everything a stream sends goes through its one queue; a stream-wide
// progress response is queued only while every watcher of the stream is
// synced, so it never overtakes an event.

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
