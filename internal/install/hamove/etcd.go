package hamove

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/etcdrestore"
	"github.com/quantyroot/quantykube/internal/install/staticpod"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

func (n *Node) stopEtcdPlan() *install.Plan {
	return &install.Plan{Op: StepStopEtcd, Steps: []install.Step{
		{Name: "save-etcd", Impact: "none: a snapshot of the local etcd member is saved under the state dir (no API server uses etcd since the cut-over)",
			Do: n.saveEtcdDo},
		{Name: "stop-etcd", Impact: "none for clients: the local etcd member stops (its manifest kept under the state dir); no API server uses it",
			Do: n.stopEtcdDo, Undo: n.startEtcdDo},
	}}
}

func (n *Node) stopEtcdPreflight(ctx context.Context) error {
	if err := n.apiserverOn(n.Paths.LocalURL(), "it was never moved; nothing to undo on this node"); err != nil {
		return err
	}
	st, err := n.mirrorStatus(ctx)
	if err != nil {
		return err
	}
	if st.Mode == api.Mirror {
		return fmt.Errorf("the store still mirrors etcd (no cut-over): undo goes straight to `quantykube undo store --ha %s` on each node", StepSwitchBack)
	}
	if _, err := os.Stat(n.Paths.etcdManifest()); err != nil {
		return fmt.Errorf("%s is missing: etcd is not running on this node as kubeadm runs it; put its manifest back first", n.Paths.etcdManifest())
	}
	return nil
}

func (n *Node) saveEtcdDo(ctx context.Context) error {
	if _, err := n.etcdMembers(ctx); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	path, size, err := n.Paths.SaveSnapshot(sctx, n.Paths.localEtcd(), "etcd-before-undo")
	if err != nil {
		// Without quorum (its peers stopped) a member may not answer; its
		// data dir is set aside whole by restore-etcd, never deleted.
		fmt.Fprintf(n.Out, "  the local etcd member could not be saved to a snapshot (%v); its data dir is kept whole by restore-etcd\n", err)
		return nil
	}
	fmt.Fprintf(n.Out, "  etcd saved to %s (%d KiB)\n", path, size>>10)
	return nil
}

func (n *Node) stopEtcdDo(ctx context.Context) error {
	return etcdrestore.Stop(ctx, n.Paths.Kubelet(), n.Paths.etcdManifest(), n.Paths.savedEtcdManifest(), n.Paths.localEtcdAddr())
}

func (n *Node) startEtcdDo(ctx context.Context) error {
	return etcdrestore.Start(n.Paths.etcdManifest(), n.Paths.savedEtcdManifest())
}

// replayedSnapshot is the store snapshot replay-to saves; restore-etcd on
// every node reads it at the same path (the other nodes fetch it there).
func (p Paths) replayedSnapshot() string { return filepath.Join(p.stepDir(StepReplayTo), "store.db") }

func (n *Node) replayToPlan() *install.Plan {
	return &install.Plan{Op: StepReplayTo, Steps: []install.Step{
		{Name: "snapshot-store", Impact: "none: a snapshot of the store (etcd's format) is saved; etcd's members are restored from it",
			Do: n.snapshotStoreDo},
		{Name: "serve-snapshot", Impact: "none: the snapshot is served (HTTPS, etcd's peer certificates both ways) on this node's address, port " + n.Paths.SnapshotPort + ", to the other nodes' restore-etcd, until cutback",
			Do: n.serveSnapshotDo, Undo: n.stopServingDo},
		{Name: "replay-to", Impact: "none: the store records that it replays its changes after the snapshot onto etcd (it waits until etcd's members are restored); compaction waits meanwhile",
			Do: n.replayToDo, Undo: n.replayStopDo},
	}}
}

func (n *Node) replayToPreflight(ctx context.Context) error {
	st, err := n.mirrorStatus(ctx)
	if err != nil {
		return err
	}
	if st.Mode != api.Owner {
		return fmt.Errorf("the store is in mode %s, not the owner: replay-to comes after the cut-over and stop-etcd", st.Mode)
	}
	if err := n.checkEtcdutl(ctx); err != nil {
		return err
	}
	ms, err := n.etcdMembers(ctx)
	if err != nil {
		return err
	}
	for _, m := range ms {
		u, _ := url.Parse(m.ClientURL)
		if etcdrestore.Listening(u.Host) {
			return fmt.Errorf("etcd member %s still runs (%s): run `quantykube undo store --ha %s` on its node first", m.Name, m.ClientURL, StepStopEtcd)
		}
	}
	return nil
}

// checkEtcdutl refuses an etcdutl that is missing, or of another etcd
// minor version than the cluster's etcd (its image's tag, in the manifest
// stop-etcd saved).
func (n *Node) checkEtcdutl(ctx context.Context) error {
	m, _ := os.ReadFile(n.Paths.savedEtcdManifest()) // missing: stop-etcd's own preflight asks for it
	return etcdrestore.CheckEtcdutl(ctx, n.Paths.Etcdutl, m)
}

// replayRecord is what replay-to recorded: the snapshot and its revision.
type replayRecord struct {
	Snapshot string `json:"snapshot"`
	Revision int64  `json:"revision"`
}

func (p Paths) replayRecordFile() string {
	return filepath.Join(p.stepDir(StepReplayTo), "snapshot.json")
}

func (n *Node) snapshotStoreDo(ctx context.Context) error {
	path, _, err := n.Paths.SaveSnapshot(ctx, n.Paths.LocalURL(), "store-for-etcd")
	if err != nil {
		return err
	}
	rev, err := n.snapshotRevision(ctx, path)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(n.Paths.stepDir(StepReplayTo), 0o700); err != nil {
		return err
	}
	if err := os.Rename(path, n.Paths.replayedSnapshot()); err != nil {
		return fmt.Errorf("move the snapshot into place: %w", err)
	}
	b, _ := json.Marshal(replayRecord{Snapshot: n.Paths.replayedSnapshot(), Revision: rev})
	fmt.Fprintf(n.Out, "  the store saved to %s at revision %d\n", n.Paths.replayedSnapshot(), rev)
	return staticpod.WriteAtomic(n.Paths.replayRecordFile(), b, 0o600)
}

// snapshotRevision is the revision of a snapshot file (etcdutl's status).
func (n *Node) snapshotRevision(ctx context.Context, path string) (int64, error) {
	return etcdrestore.SnapshotRevision(ctx, n.Paths.Etcdutl, path)
}

func (n *Node) readReplayRecord() (replayRecord, error) {
	var r replayRecord
	b, err := os.ReadFile(n.Paths.replayRecordFile())
	if err != nil {
		return r, fmt.Errorf("read what snapshot-store recorded: %w", err)
	}
	return r, json.Unmarshal(b, &r)
}

func (n *Node) replayToDo(ctx context.Context) error {
	rec, err := n.readReplayRecord()
	if err != nil {
		return err
	}
	ms, err := n.etcdMembers(ctx)
	if err != nil {
		return err
	}
	a, err := n.admin()
	if err != nil {
		return err
	}
	defer a.Close()
	if err := etcdrestore.ReplayTo(ctx, a, n.etcdPeer(ms), rec.Revision); err != nil {
		return err
	}
	fmt.Fprintf(n.Out, "  the store replays onto etcd from revision %d; run `quantykube undo store --ha %s` on every control-plane node (each fetches %s from here)\n", rec.Revision, StepRestoreEtcd, rec.Snapshot)
	return nil
}

func (n *Node) replayStopDo(ctx context.Context) error {
	a, err := n.admin()
	if err != nil {
		return err
	}
	defer a.Close()
	return etcdrestore.StopReplay(ctx, a)
}

func (n *Node) restoreEtcdPlan() *install.Plan {
	return &install.Plan{Op: StepRestoreEtcd, Steps: []install.Step{
		{Name: "fetch-snapshot", Impact: "none: replay-to's snapshot is fetched from the node that serves it, unless it is here already (or --snapshot names one)",
			Do: n.fetchSnapshotDo, Undo: n.unfetchSnapshotDo},
		{Name: "restore", Impact: "none for clients: the local etcd member's data dir is set aside (kept) and restored from the store's snapshot with etcd's member names, peer URLs and token",
			Do: n.restoreEtcdDo, Undo: n.unrestoreEtcdDo},
		{Name: "start-etcd", Impact: "none for clients: etcd's manifest goes back; the member starts, and once a quorum is restored the store's replay reaches etcd",
			Do: n.startEtcdDo, Undo: n.stopEtcdDo},
	}}
}

func (n *Node) snapshotFile() string {
	if n.Snapshot != "" {
		return n.Snapshot
	}
	return n.Paths.replayedSnapshot()
}

func (n *Node) restoreEtcdPreflight(ctx context.Context) error {
	if err := n.checkEtcdutl(ctx); err != nil {
		return err
	}
	if _, err := os.Stat(n.Paths.savedEtcdManifest()); err != nil {
		return fmt.Errorf("etcd's manifest was not saved by stop-etcd on this node: run `quantykube undo store --ha %s` here first", StepStopEtcd)
	}
	if etcdrestore.Listening(n.Paths.localEtcdAddr()) {
		return fmt.Errorf("etcd runs on this node (%s answers); restore-etcd restores a stopped member: run `quantykube undo store --ha %s` here first", n.Paths.localEtcdAddr(), StepStopEtcd)
	}
	st, err := n.mirrorStatus(ctx)
	if err != nil {
		return err
	}
	if st.Mode != api.ReplayingTo {
		return fmt.Errorf("the store is in mode %s, not replaying onto etcd: run `quantykube undo store --ha %s` on the first node first", st.Mode, StepReplayTo)
	}
	have, err := n.haveSnapshot(ctx, st.Since)
	if err != nil || have {
		return err
	}
	// The fetch step downloads it and checks its revision.
	if _, err := n.findSnapshotSource(ctx); err != nil {
		return fmt.Errorf("the store's snapshot is not on this node and no control-plane node serves it (%v): rerun `quantykube undo store --ha %s` on the node that ran it, or copy %s from there", err, StepReplayTo, n.snapshotFile())
	}
	return nil
}

// haveSnapshot reports whether the snapshot restore-etcd reads is here at
// the revision the store replays from. A file at another revision is
// refused, except one fetched earlier (from a replay-to run since rerun):
// that one the fetch replaces.
func (n *Node) haveSnapshot(ctx context.Context, want int64) (bool, error) {
	if _, err := os.Stat(n.snapshotFile()); err != nil {
		if n.Snapshot != "" {
			return false, fmt.Errorf("the snapshot %s (--snapshot) cannot be read: %v", n.Snapshot, err)
		}
		return false, nil
	}
	rev, err := n.snapshotRevision(ctx, n.snapshotFile())
	if err != nil {
		return false, err
	}
	if rev == want {
		return true, nil
	}
	if own, _ := n.Done(StepReplayTo); n.Snapshot == "" && !own {
		return false, nil
	}
	return false, fmt.Errorf("the store replays from revision %d, the snapshot %s is at %d: restore etcd from the snapshot replay-to saved (rerun `quantykube undo store --ha %s` on its node if it was not)", want, n.snapshotFile(), rev, StepReplayTo)
}

func (p Paths) asideFile() string { return filepath.Join(p.stepDir(StepRestoreEtcd), "aside.path") }

// restore is restore-etcd's restore of the local member from the store's
// snapshot, with every member of etcd's cluster as it was.
func (n *Node) restore(ctx context.Context) (etcdrestore.Restore, error) {
	r := etcdrestore.Restore{Etcdutl: n.Paths.Etcdutl, Snapshot: n.snapshotFile(), AsideFile: n.Paths.asideFile(),
		Member: etcdrestore.Member{Name: n.facts.Name, DataDir: n.facts.EtcdDataDir, PeerURL: n.facts.EtcdPeerURL, Token: n.facts.EtcdToken}}
	ms, err := n.etcdMembers(ctx)
	if err != nil {
		return r, err
	}
	for _, m := range ms {
		r.InitialCluster = append(r.InitialCluster, m.Name+"="+m.PeerURL)
	}
	return r, nil
}

func (n *Node) restoreEtcdDo(ctx context.Context) error {
	r, err := n.restore(ctx)
	if err != nil {
		return err
	}
	return r.Do(ctx, n.Out)
}

// unrestoreEtcdDo puts the set-aside data dir back.
func (n *Node) unrestoreEtcdDo(ctx context.Context) error {
	r := etcdrestore.Restore{AsideFile: n.Paths.asideFile(), Member: etcdrestore.Member{DataDir: n.facts.EtcdDataDir}}
	return r.Undo()
}
