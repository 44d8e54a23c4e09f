package replica

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/pkg/v3/idutil"
	"go.etcd.io/etcd/pkg/v3/wait"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// Start makes store (opened with mvcc.Options.Replicated) a cluster member:
// it restarts from the WAL in DataDir/raft if there is one, bootstraps a new
// cluster (InitialClusterState "new") or joins one ("existing") otherwise,
// then serves the peer URLs and runs raft. A failure later stops the member;
// Done and Err tell.
func Start(cfg Config, store *mvcc.Store, log *slog.Logger) (*Replica, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Replica{
		cfg: cfg, log: log, store: store, zlog: newZapLogger(),
		waits: wait.New(), applyWait: wait.NewTimeList(),
		leaderChanged: make(chan struct{}), published: make(chan struct{}),
		stopc: make(chan struct{}), donec: make(chan struct{}), errc: make(chan error, 1),
	}
	peerLns, err := listenPeers(cfg.ListenPeerURLs)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.snapDir(), 0o700); err != nil {
		closeListeners(peerLns)
		return nil, fmt.Errorf("create %s: %w", cfg.snapDir(), err)
	}
	r.snapshotter = snap.New(r.zlog, cfg.snapDir())
	var peers []*pb.Member
	if wal.Exist(cfg.walDir()) {
		err = r.restart()
	} else if cfg.InitialClusterState == "new" {
		err = r.bootstrap()
	} else {
		peers, err = r.join()
	}
	if err != nil {
		closeListeners(peerLns)
		return nil, err
	}
	r.reqIDs = idutil.NewGenerator(uint16(r.id), time.Now())
	r.reads = newReadIndexer(r)
	if r.transport, err = r.newTransport(); err != nil {
		closeListeners(peerLns)
		return nil, err
	}
	r.syncPeers(peers)
	r.servePeers(peerLns)
	go r.run()
	go r.reads.loop()
	go r.publish()
	r.purge()
	return r, nil
}

func (r *Replica) raftConfig(applied uint64) *raft.Config {
	return &raft.Config{
		ID:                        r.id,
		ElectionTick:              int(r.cfg.ElectionTimeout / r.cfg.Heartbeat),
		HeartbeatTick:             1,
		Storage:                   r.storage,
		Applied:                   applied,
		MaxSizePerMsg:             1 << 20,
		MaxInflightMsgs:           512,
		MaxUncommittedEntriesSize: 1 << 30,
		CheckQuorum:               true,
		PreVote:                   true,
		Logger:                    newRaftLogger(r.log),
	}
}

// restart opens the WAL and the newest snapshot it names, brings the store
// to the snapshot if an install was interrupted, and restarts raft with the
// entries after the store's applied index still to apply.
func (r *Replica) restart() error {
	walSnaps, err := wal.ValidSnapshotEntries(r.zlog, r.cfg.walDir())
	if err != nil {
		return walError(r.cfg.walDir(), err)
	}
	snapshot, err := r.snapshotter.LoadNewestAvailable(walSnaps)
	if err != nil && !errors.Is(err, snap.ErrNoSnapshot) {
		return fmt.Errorf("load raft snapshot from %s: %w (the snapshot files are damaged: remove this member with etcdctl member remove and add it again with an empty data dir)", r.cfg.snapDir(), err)
	}
	if snapshot == nil {
		snapshot = &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{ConfState: &raftpb.ConfState{}}}
	}
	if err := r.recoverStore(snapshot); err != nil {
		return err
	}
	walsnap := walSnap(snapshot.GetMetadata())
	walsnap.ConfState = nil
	w, meta, hs, ents, err := r.openWAL(walsnap)
	if err != nil {
		return err
	}
	md := &pb.Metadata{}
	if err := proto.Unmarshal(meta, md); err != nil {
		w.Close()
		return walError(r.cfg.walDir(), err)
	}
	if err := walCoversApplied(snapshot.GetMetadata().GetIndex(), ents, r.store.Applied().Index); err != nil {
		w.Close()
		return walError(r.cfg.walDir(), err)
	}
	r.wal, r.id, r.clusterID = w, md.GetNodeID(), md.GetClusterID()
	r.storage = raft.NewMemoryStorage()
	if !raft.IsEmptySnap(snapshot) {
		_ = r.storage.ApplySnapshot(snapshot)
	}
	_ = r.storage.SetHardState(hs)
	_ = r.storage.Append(ents)
	r.confState = snapshot.GetMetadata().GetConfState()
	if cs, _ := r.store.ConfState(); cs != nil {
		r.confState = &raftpb.ConfState{}
		_ = proto.Unmarshal(cs, r.confState)
	}
	r.snapIndex = snapshot.GetMetadata().GetIndex()
	applied := r.store.Applied().Index
	r.applied.Store(applied)
	r.term.Store(hs.GetTerm())
	r.committed.Store(hs.GetCommit())
	r.log.Info("restarting member from its WAL", "member", types.ID(r.id).String(), "cluster", types.ID(r.clusterID).String(),
		"applied", applied, "commit", hs.GetCommit(), "snapshot", r.snapIndex, "entries", len(ents))
	// raft re-delivers every committed entry after the snapshot, as in
	// etcd: its configuration comes from the snapshot plus the conf changes
	// it replays. ApplyEntries skips what the store holds already (etcd's
	// consistent-index check; the store may even be ahead of the WAL's
	// commit index, which etcd's WAL syncs lazily), replayConf hands the
	// replayed conf changes to raft.
	r.delivered = r.snapIndex
	r.node = raft.RestartNode(r.raftConfig(r.snapIndex))
	return nil
}

// recoverStore installs the state snapshot saved beside the raft snapshot
// when the store is behind it (a crash during an install).
func (r *Replica) recoverStore(snapshot *raftpb.Snapshot) error {
	restoring, err := r.store.Restoring()
	if err != nil {
		return err
	}
	idx := snapshot.GetMetadata().GetIndex()
	if !restoring && r.store.Applied().Index >= idx {
		return nil
	}
	r.log.Warn("the store is behind the raft snapshot; installing the saved state snapshot", "snapshot", idx)
	return r.installState(idx)
}

// bootstrap starts a new cluster from --initial-cluster: every member
// computes the same member ids and cluster id (etcd's), and starts from a
// raft snapshot at index 1 holding the members. A single store's data is
// kept: that is how its data dir becomes a cluster's first member.
func (r *Replica) bootstrap() error {
	urls, _ := r.cfg.initialCluster()
	cl, err := membership.NewClusterFromURLsMap(r.zlog, r.cfg.InitialClusterToken, urls)
	if err != nil {
		return fmt.Errorf("--initial-cluster: %w", err)
	}
	members := cl.Members()
	if len(members) > 1 && r.store.Rev() > 1 {
		return fmt.Errorf("data dir %s holds data (revision %d): it can only bootstrap a cluster of one member; start it with --initial-cluster %s=%s, then grow the cluster with etcdctl member add",
			r.cfg.DataDir, r.store.Rev(), r.cfg.Name, r.cfg.AdvertisePeerURLs[0])
	}
	r.clusterID = uint64(cl.ID())
	if r.store.Rev() <= 1 {
		return r.bootstrapEmpty(members)
	}
	cs := &raftpb.ConfState{}
	var pms []*pb.Member
	for _, m := range members {
		cs.Voters = append(cs.Voters, uint64(m.ID))
		// Names and client URLs are published through the log once each
		// member runs (publish), so every member's state stays identical.
		pms = append(pms, &pb.Member{ID: uint64(m.ID), PeerURLs: m.PeerURLs})
		if m.Name == r.cfg.Name {
			r.id = uint64(m.ID)
		}
	}
	snapshot := &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(1), Term: proto.Uint64(1), ConfState: cs}}
	if err := r.createWAL(snapshot); err != nil {
		return err
	}
	csb, _ := proto.Marshal(cs)
	if err := r.store.Bootstrap(mvcc.AppliedIndex{Index: 1, Term: 1}, pms, csb); err != nil {
		return err
	}
	r.confState, r.snapIndex = cs, 1
	r.applied.Store(1)
	r.committed.Store(1)
	r.term.Store(1)
	r.log.Info("bootstrapped a new cluster", "member", types.ID(r.id).String(), "cluster", types.ID(r.clusterID).String(), "members", len(members))
	r.delivered = 1
	r.node = raft.RestartNode(r.raftConfig(1))
	return nil
}

// bootstrapEmpty starts a new cluster on an empty store as etcd does: raft
// writes one conf change entry per member at indexes 1..n, so the whole
// state is in the log from index 1 (what etcd's WAL readers, such as the
// robustness validators, expect).
func (r *Replica) bootstrapEmpty(members []*membership.Member) error {
	var peers []raft.Peer
	for _, m := range members {
		ctx, err := json.Marshal(m)
		if err != nil {
			return err
		}
		peers = append(peers, raft.Peer{ID: uint64(m.ID), Context: ctx})
		if m.Name == r.cfg.Name {
			r.id = uint64(m.ID)
		}
	}
	if err := r.createWAL(nil); err != nil {
		return err
	}
	r.log.Info("bootstrapped a new cluster", "member", types.ID(r.id).String(), "cluster", types.ID(r.clusterID).String(), "members", len(members))
	r.node = raft.StartNode(r.raftConfig(0), peers)
	return nil
}

// createWAL creates the WAL with the member's identity and, for a
// bootstrap, the initial snapshot.
func (r *Replica) createWAL(snapshot *raftpb.Snapshot) error {
	nodeID, clusterID := r.id, r.clusterID
	meta, _ := proto.Marshal(&pb.Metadata{NodeID: &nodeID, ClusterID: &clusterID})
	w, err := wal.Create(r.zlog, r.cfg.walDir(), meta)
	if err != nil {
		return fmt.Errorf("create WAL in %s: %w", r.cfg.walDir(), err)
	}
	r.wal = w
	r.storage = raft.NewMemoryStorage()
	if snapshot == nil {
		return nil
	}
	md := snapshot.GetMetadata()
	if err := r.snapshotter.SaveSnap(snapshot); err != nil {
		return fmt.Errorf("save raft snapshot in %s: %w", r.cfg.snapDir(), err)
	}
	if err := w.SaveSnapshot(walSnap(md)); err != nil {
		return walError(r.cfg.walDir(), err)
	}
	hs := &raftpb.HardState{Term: proto.Uint64(md.GetTerm()), Commit: proto.Uint64(md.GetIndex())}
	if err := w.Save(hs, nil); err != nil {
		return walError(r.cfg.walDir(), err)
	}
	_ = r.storage.ApplySnapshot(snapshot)
	return r.storage.SetHardState(hs)
}

// openWAL opens the WAL at walsnap and reads it. A WAL whose last record
// is torn (a kill -9 or a crash in the middle of a write: io.ErrUnexpectedEOF)
// is repaired once, as etcd does: the torn record is cut off. It was never
// fsynced, so nothing that depended on it — a vote, an append answered to
// the leader, an applied entry — was ever acknowledged. Any other error, or
// a WAL still unreadable after one repair, is damage (walError).
func (r *Replica) openWAL(walsnap *walpb.Snapshot) (*wal.WAL, []byte, *raftpb.HardState, []*raftpb.Entry, error) {
	dir := r.cfg.walDir()
	for repaired := false; ; repaired = true {
		w, err := wal.Open(r.zlog, dir, walsnap)
		if err != nil {
			return nil, nil, nil, nil, walError(dir, err)
		}
		meta, hs, ents, err := w.ReadAll()
		if err == nil {
			return w, meta, hs, ents, nil
		}
		w.Close()
		if repaired || !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, nil, nil, nil, walError(dir, err)
		}
		if !wal.Repair(r.zlog, dir) {
			return nil, nil, nil, nil, walError(dir, fmt.Errorf("%w (and cutting off its torn last record failed)", err))
		}
		r.log.Warn("raft WAL ended in a torn record (a crash in the middle of a write); cut it off", "dir", dir)
	}
}

// walCoversApplied checks that the WAL, read from the snapshot at
// snapIndex, still holds every entry the store applied. An entry is written
// and synced to the WAL before it is applied (handleReady), so a WAL that
// ends below the applied index lost synced records: bytes in its middle
// overwritten so that a record's length runs past the file, which reads as
// a torn tail and which the repair then cut off with everything after it
// (test/store TestClusterCorruptWAL), or an older copy of the directory.
// A member that serves on it would have forgotten appends it acknowledged
// to the leader: raft's safety rests on them.
func walCoversApplied(snapIndex uint64, ents []*raftpb.Entry, applied uint64) error {
	last := snapIndex
	if len(ents) > 0 {
		last = ents[len(ents)-1].GetIndex()
	}
	if applied <= last {
		return nil
	}
	return fmt.Errorf("it ends at entry %d, but the store applied entries up to %d, each synced to the WAL first: synced records are gone (overwritten in the middle of the WAL — a repair keeps the file as it was in *.wal.broken — or an older copy of it)", last, applied)
}

// walError names a WAL that cannot be read and what to do about it.
func walError(dir string, err error) error {
	return fmt.Errorf("raft WAL in %s cannot be used: %v; this member's log is damaged: remove it from the cluster (etcdctl member remove), then add it back (etcdctl member add) with an empty --data-dir — the other members keep serving", dir, err)
}

func newZapLogger() *zap.Logger {
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	cfg.Sampling = nil
	l, err := cfg.Build()
	if err != nil {
		return zap.NewNop()
	}
	return l
}
