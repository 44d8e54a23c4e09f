package replica

import (
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// run is the raft loop: it ticks raft and handles each Ready in order —
// persist (snapshot metadata, then WAL, synced), send, apply, advance.
func (r *Replica) run() {
	defer r.shutdown()
	ticker := time.NewTicker(r.cfg.Heartbeat)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			r.node.Tick()
		case rd := <-r.node.Ready():
			if err := r.handleReady(rd); err != nil {
				r.fail(err)
				return
			}
		case err := <-r.transport.ErrorC:
			r.fail(fmt.Errorf("peer transport: %w", err))
			return
		case <-r.stopc:
			return
		}
	}
}

func (r *Replica) handleReady(rd raft.Ready) error {
	if rd.SoftState != nil {
		r.setLeader(rd.SoftState.Lead)
	}
	if len(rd.ReadStates) > 0 {
		r.reads.deliver(rd.ReadStates)
	}
	// A leader sends its appends before it writes them to its own WAL (the
	// raft thesis, 10.2.1; etcd does the same): the entries commit once a
	// quorum, which may or may not include the leader, has them on disk.
	leaderSent := r.IsLeader()
	if leaderSent {
		r.send(rd.Messages)
	}
	snapshot := rd.Snapshot
	if !raft.IsEmptySnap(snapshot) {
		if err := r.snapshotter.SaveSnap(snapshot); err != nil {
			return fmt.Errorf("save raft snapshot in %s: %w (is the disk full?)", r.cfg.snapDir(), err)
		}
	}
	if err := r.wal.Save(rd.HardState, rd.Entries); err != nil {
		return fmt.Errorf("write raft WAL in %s: %w (is the disk full? free space and restart this member; the others keep serving)", r.cfg.walDir(), err)
	}
	if hs := rd.HardState; hs != nil {
		r.term.Store(hs.GetTerm())
		r.committed.Store(hs.GetCommit())
	}
	if !raft.IsEmptySnap(snapshot) {
		if err := r.receiveSnapshot(snapshot); err != nil {
			return err
		}
	}
	if err := r.storage.Append(rd.Entries); err != nil {
		return fmt.Errorf("append raft entries: %w", err)
	}
	if !leaderSent {
		r.send(rd.Messages)
	}
	if err := r.apply(rd.CommittedEntries); err != nil {
		return err
	}
	if err := r.maybeSnapshot(); err != nil {
		return err
	}
	r.node.Advance()
	r.answerConfChanges()
	return nil
}

// receiveSnapshot installs a snapshot sent by the leader: its metadata goes
// into the WAL, the state it carries (saved by the transport as
// <index>.snap.db) replaces the store's.
func (r *Replica) receiveSnapshot(snapshot *raftpb.Snapshot) error {
	md := snapshot.GetMetadata()
	if err := r.wal.SaveSnapshot(walSnap(md)); err != nil {
		return fmt.Errorf("write raft WAL in %s: %w", r.cfg.walDir(), err)
	}
	if err := r.installState(md.GetIndex()); err != nil {
		return err
	}
	if err := r.storage.ApplySnapshot(snapshot); err != nil {
		return fmt.Errorf("apply raft snapshot %d: %w", md.GetIndex(), err)
	}
	r.confState, r.snapIndex, r.delivered = md.GetConfState(), md.GetIndex(), md.GetIndex()
	r.applied.Store(md.GetIndex())
	r.applyWait.Trigger(md.GetIndex())
	r.syncPeers(nil)
	_ = r.snapshotter.ReleaseSnapDBs(snapshot)
	r.log.Info("installed a snapshot of the cluster's state", "index", md.GetIndex(), "revision", r.store.Rev())
	return nil
}

// shutdown stops everything the loop started, once.
func (r *Replica) shutdown() {
	r.stopOnce.Do(func() { close(r.stopc) })
	r.node.Stop()
	r.stopPeers()
	r.transport.Stop()
	if err := r.wal.Close(); err != nil {
		r.log.Warn("close WAL", "err", err)
	}
	close(r.donec)
}
