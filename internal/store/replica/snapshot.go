package replica

import (
	"errors"
	"fmt"
	"os"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// catchUpEntries is how many applied entries stay in the in-memory log
// behind a snapshot, so a slightly lagging follower catches up from entries
// rather than from a whole state snapshot (etcd's default).
const catchUpEntries = 5000

// send passes messages to the transport; a snapshot message gets the
// store's current state attached and goes through the snapshot path.
func (r *Replica) send(msgs []*raftpb.Message) {
	out := msgs[:0]
	for _, m := range msgs {
		if m.GetType() == raftpb.MsgSnap {
			go r.sendState(m)
			continue
		}
		out = append(out, m)
	}
	r.transport.Send(out)
}

// sendState streams the store's whole state to a member that raft says
// needs a snapshot. The state is written to a file first (the transport
// needs its size), as of one pebble snapshot whose applied index and
// ConfState become the message's metadata (etcd's merged snapshot).
func (r *Replica) sendState(m *raftpb.Message) {
	f, err := os.CreateTemp(r.cfg.snapDir(), "send-*.tmp")
	if err != nil {
		r.log.Error("write state snapshot", "err", err)
		r.node.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
		return
	}
	defer os.Remove(f.Name())
	at, confState, err := r.store.WriteState(f)
	if err == nil {
		_, err = f.Seek(0, 0)
	}
	st, serr := f.Stat()
	if err != nil || serr != nil {
		f.Close()
		r.log.Error("write state snapshot", "file", f.Name(), "err", errors.Join(err, serr))
		r.node.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
		return
	}
	cs := &raftpb.ConfState{}
	_ = proto.Unmarshal(confState, cs)
	msg := proto.Clone(m).(*raftpb.Message)
	msg.Snapshot = &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(at.Index), Term: proto.Uint64(at.Term), ConfState: cs}}
	sm := snap.NewMessage(msg, f, st.Size())
	r.log.Info("sending a snapshot of the cluster's state", "to", fmt.Sprintf("%x", m.GetTo()), "index", at.Index, "bytes", st.Size())
	r.transport.SendSnapshot(sm)
	select {
	case ok := <-sm.CloseNotify():
		if !ok {
			r.log.Warn("state snapshot not delivered", "to", fmt.Sprintf("%x", m.GetTo()))
		}
	case <-r.stopc:
	}
}

// installState replaces the store's state with the one saved by the
// transport for the snapshot at index.
func (r *Replica) installState(index uint64) error {
	path, err := r.snapshotter.DBFilePath(index)
	if err != nil {
		return fmt.Errorf("state snapshot %d is missing from %s: %w; remove this member (etcdctl member remove) and add it again with an empty data dir", index, r.cfg.snapDir(), err)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open state snapshot: %w", err)
	}
	defer f.Close()
	at, err := r.store.RestoreState(f)
	if err != nil {
		return fmt.Errorf("install state snapshot %s: %w; remove this member (etcdctl member remove) and add it again with an empty data dir", path, err)
	}
	if at.Index != index {
		return fmt.Errorf("state snapshot %s holds index %d, raft expected %d", path, at.Index, index)
	}
	return nil
}

// maybeSnapshot takes a raft snapshot every SnapshotCount applied entries:
// pebble is synced first (the store must never be behind a snapshot the log
// is truncated to), then the snapshot metadata is saved and the in-memory
// log and old WAL files are released.
//
// The snapshot is taken at raft's applied index (delivered), not the
// store's: after a restart raft replays the entries the store holds
// already, from its in-memory log; a snapshot at the store's index, and the
// log compacted behind it, would take those entries from under the replay
// (raft panics: "requested index is unavailable due to compaction"; seen
// when a leader was killed 10,001 entries after its last snapshot).
func (r *Replica) maybeSnapshot() error {
	applied := r.delivered
	if applied-r.snapIndex <= r.cfg.SnapshotCount {
		return nil
	}
	if err := r.store.Sync(); err != nil {
		return fmt.Errorf("sync the store in %s: %w", r.cfg.DataDir, err)
	}
	s, err := r.storage.CreateSnapshot(applied, r.confState, nil)
	if err != nil {
		if errors.Is(err, raft.ErrSnapOutOfDate) {
			return nil
		}
		return fmt.Errorf("create raft snapshot at %d: %w", applied, err)
	}
	if err := r.snapshotter.SaveSnap(s); err != nil {
		return fmt.Errorf("save raft snapshot in %s: %w (is the disk full?)", r.cfg.snapDir(), err)
	}
	md := s.GetMetadata()
	if err := r.wal.SaveSnapshot(walSnap(md)); err != nil {
		return fmt.Errorf("write raft WAL in %s: %w", r.cfg.walDir(), err)
	}
	if err := r.wal.ReleaseLockTo(md.GetIndex()); err != nil {
		return fmt.Errorf("release WAL files: %w", err)
	}
	r.snapIndex = applied
	if applied > catchUpEntries {
		if err := r.storage.Compact(applied - catchUpEntries); err != nil && !errors.Is(err, raft.ErrCompacted) {
			return fmt.Errorf("compact raft log: %w", err)
		}
	}
	return nil
}

// purge removes old WAL and snapshot files in the background, keeping the
// newest 5 of each (etcd's defaults); a WAL file still locked (not yet behind
// a snapshot) is never removed.
func (r *Replica) purge() {
	lg := r.zlog
	for _, d := range []struct{ dir, suffix string }{{r.cfg.walDir(), "wal"}, {r.cfg.snapDir(), "snap"}, {r.cfg.snapDir(), "snap.db"}} {
		errc := fileutil.PurgeFile(lg, d.dir, d.suffix, 5, 30*time.Second, r.stopc)
		go func() {
			select {
			case err := <-errc:
				r.log.Warn("purge old raft files", "dir", d.dir, "err", err)
			case <-r.stopc:
			}
		}()
	}
}

// walSnap is the WAL's record of a raft snapshot's metadata.
func walSnap(md *raftpb.SnapshotMetadata) *walpb.Snapshot {
	return &walpb.Snapshot{Index: proto.Uint64(md.GetIndex()), Term: proto.Uint64(md.GetTerm()), ConfState: md.GetConfState()}
}
