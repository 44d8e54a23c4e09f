package storemove

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/etcdrestore"
	"github.com/quantyroot/quantykube/internal/install/staticpod"
	"github.com/quantyroot/quantykube/internal/install/systemd"
)

// Undo moves the API server back from the store onto etcd.
func (m *Mover) Undo(ctx context.Context, dryRun bool) error {
	m.defaults()
	if dryRun {
		return m.subject().DryRun(ctx, install.OpUndo)
	}
	defer m.closeAll()
	ran, err := m.subject().Execute(ctx, install.OpUndo)
	if err != nil || !ran {
		return err
	}
	pause := "none (done before)"
	if m.pause != nil {
		pause = m.pause.Duration.Round(time.Millisecond).String()
	}
	fmt.Fprintf(m.Out, "undone: the API server runs on etcd again (%s), which holds the store's keys with the store's revisions (restored at %d, replayed since); cut-back write pause %s; API-server downtime %v; the store's data is kept in %s\n",
		m.endpoint, m.snapRev, pause, m.Downtime.Round(time.Millisecond), m.Paths.DataDir)
	return nil
}

// undoPlan gives etcd the store's keyspace with the store's own revisions,
// as the HA undo does (docs/adr/005, docs/adr/202): etcd is restored from
// the store's etcd-format snapshot at revision S0 and the store replays
// every later revision onto it, one for one, while the API server serves
// the store; the cut-back makes the store a mirror of etcd (writes held for
// the last few revisions, then forwarded to etcd). Only then is the API
// server switched back: its downtime (stop-apiserver to restore-apiserver)
// is its own restart, with nothing to copy. Nothing is ever written into
// etcd but the store's own revisions: no raise, no compaction, so no
// client sees a resourceVersion change without a write.
//
// The commit step is restore-apiserver, as before: a failure before it
// puts everything back, the cut-back too (a cut-over makes the store the
// owner again, taking etcd's revisions since), etcd's previous data dir
// included.
func (m *Mover) undoPlan() *install.Plan {
	return &install.Plan{Op: install.OpUndo, Steps: []install.Step{
		{Name: "kubeadm-config", Impact: "none: kubeadm's ClusterConfiguration names etcd again (byte for byte when nothing else changed it)",
			Do: m.restoreClusterConfigDo, Undo: m.recordStoreDo},
		{Name: "save-etcd", Impact: "none: a snapshot of etcd as it is (it served nothing since the move) is saved under the state dir",
			Do: m.saveEtcdDo},
		{Name: "snapshot-store", Impact: "none: etcd's etcdutl is copied under the state dir; a snapshot of the store (etcd's format) is saved there and its revision read",
			Do: m.snapshotStoreDo},
		{Name: "stop-etcd", Impact: "none for clients (the API server serves the store): etcd stops, its manifest kept under the state dir",
			Do: m.stopEtcdDo, Undo: m.startEtcdDo},
		{Name: "restore-etcd", Impact: "none for clients: etcd's data dir is set aside (kept) and restored from the store's snapshot with etcd's member name, peer URL and token",
			Do: m.restoreEtcdDo, Undo: m.unrestoreEtcdDo},
		{Name: "start-etcd", Impact: "none for clients: etcd starts, at the snapshot's revision",
			Do: m.startEtcdDo, Undo: m.stopEtcdDo},
		{Name: "replay-to", Impact: "none for clients: the store replays its revisions since the snapshot onto etcd, one for one, until etcd is close",
			Do: m.replayToDo, Undo: m.replayStopDo},
		{Name: "cutback", Impact: "writes pause (held, not failed) while etcd applies the store's last revisions; the store becomes a mirror of etcd and forwards writes to it",
			Do: m.cutbackDo, Undo: m.cutbackUndo},
		{Name: "stop-apiserver", Impact: "the API server stops: requests fail until restore-apiserver",
			Do: m.undoStopDo, Undo: m.undoStopUndo},
		{Name: "restore-apiserver", Commit: true, Impact: "the API server starts again on etcd: its manifest as before the move (or as kubeadm re-rendered it since), --etcd-servers back on etcd; nothing to copy",
			Do: m.restoreDo, Undo: m.restoreUndo},
		{Name: "stop-store", Impact: "none: the quantykube-store unit stops and is disabled; its data stays for inspection",
			Do: m.stopStoreDo},
		m.leadersStep(),
	}}
}

// saveEtcdDo saves a snapshot of etcd (etcd's own format, restorable with
// `etcdutl snapshot restore`) before undo replaces its data dir.
func (m *Mover) saveEtcdDo(ctx context.Context) error {
	return m.Paths.saveAndPrune(ctx, m.Out, m.endpoint, "etcd-before-undo", "etcd, before undo restores it from the store,")
}

func (m *Mover) undoStopDo(ctx context.Context) error {
	m.stopped = time.Now()
	return m.Paths.StopAPIServer(ctx, m.Paths.savedStoreManifest(), m.port)
}

// undoStopUndo puts the API server back on the store: the store's unit is
// (re)installed first in case a later step had stopped or removed it. A
// manifest still in place that names the store was never moved out (the
// run stopped at the start of stop-apiserver): it is left alone, and the
// saved copy, missing or an earlier undo's, is not read.
func (m *Mover) undoStopUndo(ctx context.Context) error {
	if !systemd.Active(ctx, UnitName) {
		if err := systemd.Install(ctx, m.storeUnit()); err != nil {
			return err
		}
	}
	if present, onStore := m.Paths.manifestInPlace(); present && onStore {
		return nil
	}
	cur, err := os.ReadFile(m.Paths.savedStoreManifest())
	if err != nil {
		return fmt.Errorf("read the saved store manifest: %w", err)
	}
	return m.Paths.StartAPIServer(ctx, cur, 3*time.Minute)
}

// restoreDo starts the API server on etcd again with the manifest it ran on
// before the move. If kubeadm re-rendered the manifest while the store
// served (an upgrade), that rendering is kept and only --etcd-servers is
// put back.
func (m *Mover) restoreDo(ctx context.Context) error {
	manifest, err := m.etcdManifest()
	if err != nil {
		return err
	}
	if err := m.Paths.StartAPIServer(ctx, manifest, 3*time.Minute); err != nil {
		return err
	}
	if !m.stopped.IsZero() {
		m.Downtime = time.Since(m.stopped)
		fmt.Fprintf(m.Out, "  API-server downtime: %v\n", m.Downtime.Round(time.Millisecond))
	}
	return nil
}

// etcdManifest is the API server manifest undo restores: the saved original
// byte for byte, unless the manifest that ran on the store is not the one
// install wrote (kubeadm re-rendered it), in which case that one with
// --etcd-servers set back to etcd.
func (m *Mover) etcdManifest() ([]byte, error) {
	ran, err := os.ReadFile(m.Paths.savedStoreManifest())
	if errors.Is(err, os.ErrNotExist) {
		return m.manifest, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the saved store manifest: %w", err)
	}
	wrote, err := staticpod.SetFlag(m.manifest, "etcd-servers", StoreURL)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(ran, wrote) {
		return m.manifest, nil
	}
	fmt.Fprintln(m.Out, "  the API server's manifest was re-rendered while on the store (kubeadm upgrade?): keeping it, with --etcd-servers back on etcd")
	return staticpod.SetFlag(ran, "etcd-servers", m.endpoint)
}

func (m *Mover) restoreUndo(ctx context.Context) error {
	return m.Paths.StopAPIServer(ctx, m.Paths.savedManifest()+".undo", m.port)
}

// stopFollow ends install's follower of etcd, if it runs.
func (m *Mover) stopFollow() {
	if m.followStop != nil {
		m.followStop()
		<-m.followDone
		m.followStop = nil
	}
}

// stopStoreDo stops the store (a mirror of etcd since the cut-back),
// records its last revision as the one this undo gave etcd (install's
// refuseNewerData refuses a data dir that moved past it), and disables
// its unit; the data dir stays.
func (m *Mover) stopStoreDo(ctx context.Context) error {
	if systemd.Active(ctx, UnitName) {
		if err := systemd.Stop(ctx, UnitName); err != nil {
			return err
		}
	}
	rev := m.storeRevision(ctx)
	if rev < 0 {
		return fmt.Errorf("read the stopped store's revision from %s", m.Paths.DataDir)
	}
	h, err := m.Paths.readHandover()
	if err != nil {
		return err
	}
	h.UndoneAt = rev
	if err := m.Paths.writeHandover(h); err != nil {
		return err
	}
	m.finalRev = rev
	fmt.Fprintf(m.Out, "  the store stopped at revision %d, etcd's\n", rev)
	if err := m.forgetAside(); err != nil {
		return err
	}
	if err := m.pruneAside(); err != nil {
		return err
	}
	return m.removeUnit(ctx)
}

// pruneAside keeps the newest keepSnapshots of etcd's data dirs set aside
// by undos (each undo also saved etcd as a snapshot, pruned alike).
func (m *Mover) pruneAside() error {
	r, err := m.etcdRestore()
	if err != nil {
		return err
	}
	removed, err := etcdrestore.PruneAside(r.Member.DataDir, keepSnapshots)
	if len(removed) > 0 {
		fmt.Fprintf(m.Out, "  older set-aside etcd data dirs removed (the newest %d are kept): %s\n", keepSnapshots, strings.Join(removed, ", "))
	}
	return err
}
