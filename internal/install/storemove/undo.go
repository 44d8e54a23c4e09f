package storemove

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/staticpod"
	"github.com/quantyroot/quantykube/internal/install/systemd"
)

// Undo moves the API server back from the store onto etcd.
func (m *Mover) Undo(ctx context.Context, dryRun bool) error {
	m.defaults()
	if dryRun {
		m.subject().DryRun(ctx, install.OpUndo)
		return nil
	}
	defer m.closeAll()
	ran, err := m.subject().Execute(ctx, install.OpUndo)
	if err != nil || !ran {
		return err
	}
	fmt.Fprintf(m.Out, "undone: the API server runs on etcd again (%s); API-server downtime %v; the store's data is kept in %s\n",
		m.endpoint, m.Downtime.Round(time.Millisecond), m.Paths.DataDir)
	return nil
}

// undoPlan moves the data back while the API server still serves the store
// (save-etcd, copy-back), so the downtime (stop-apiserver to
// restore-apiserver) covers only the last few revisions, however long the
// cluster lived on the store.
func (m *Mover) undoPlan() *install.Plan {
	return &install.Plan{Op: install.OpUndo, Steps: []install.Step{
		{Name: "kubeadm-config", Impact: "none: kubeadm's ClusterConfiguration names etcd again (byte for byte when nothing else changed it)",
			Do: m.restoreClusterConfigDo, Undo: m.recordStoreDo},
		{Name: "save-etcd", Impact: "none: a snapshot of etcd is saved under the state dir before anything is written into it",
			Do: m.saveEtcdDo},
		{Name: "copy-back", Impact: "none: while the API server serves the store, etcd is made to hold the store's keys and follows its changes; etcd's revision is raised past the store's",
			Do: m.copyBackDo},
		{Name: "stop-apiserver", Impact: "the API server stops: requests fail until restore-apiserver",
			Do: m.undoStopDo, Undo: m.undoStopUndo},
		{Name: "catch-up", Impact: "API server down: the store's last changes (a few revisions) reach etcd; etcd's revision ends above the store's and is compacted there",
			Do: m.undoCatchUpDo},
		{Name: "restore-apiserver", Commit: true, Impact: "the API server starts again on etcd: its manifest as before the move (or as kubeadm re-rendered it since), --etcd-servers back on etcd",
			Do: m.restoreDo, Undo: m.restoreUndo},
		{Name: "stop-store", Impact: "none: the quantykube-store unit stops and is disabled; its data stays for inspection",
			Do: m.removeUnit},
		m.leadersStep(),
	}}
}

func (m *Mover) dialBoth() (store, etcd *clientv3.Client, err error) {
	if store, err = m.Paths.Dial(StoreURL); err != nil {
		return nil, nil, err
	}
	if etcd, err = m.Paths.Dial(m.endpoint); err != nil {
		store.Close()
		return nil, nil, err
	}
	return store, etcd, nil
}

// saveEtcdDo saves a snapshot of etcd (etcd's own format, restorable with
// `etcdutl snapshot restore`) before undo writes into it.
func (m *Mover) saveEtcdDo(ctx context.Context) error {
	return m.Paths.saveAndPrune(ctx, m.Out, m.endpoint, "etcd-before-undo", "etcd, before undo writes into it,")
}

// copyBackDo makes etcd hold the store's keys as of the store's current
// revision, starts following the store's later changes into etcd, and
// raises etcd's revision to the store's, all while the API server serves.
func (m *Mover) copyBackDo(ctx context.Context) error {
	var err error
	if m.backStore, m.backEtcd, err = m.dialBoth(); err != nil {
		return err
	}
	rev, err := m.currentRevision(ctx, m.backStore)
	if err != nil {
		return err
	}
	start := time.Now()
	b := newBackCopier(m.backStore, m.backEtcd)
	puts, dels, err := b.Merge(ctx, rev)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Out, "  etcd holds the store's keys as of revision %d: %d written, %d deleted in %v\n", rev, puts, dels, time.Since(start).Round(time.Millisecond))
	m.back = b
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.followStop, m.followDone = cancel, make(chan error, 1)
	go func() { m.followDone <- b.Follow(fctx) }()
	return m.raiseWhileServing(ctx)
}

// raiseWhileServing raises etcd's revision to the store's. The store moves
// on meanwhile (the API server writes a few revisions a second), so it
// chases it until etcd is level; catch-up, with the API server stopped,
// then has only the last few revisions left to cover.
func (m *Mover) raiseWhileServing(ctx context.Context) error {
	start := time.Now()
	from, err := m.currentRevision(ctx, m.backEtcd)
	if err != nil {
		return err
	}
	var total int64
	for {
		target, err := m.currentRevision(ctx, m.backStore)
		if err != nil {
			return err
		}
		now, n, err := raiseEtcd(ctx, m.backEtcd, target)
		total += n
		if err != nil {
			return err
		}
		if n == 0 {
			fmt.Fprintf(m.Out, "  etcd raised from revision %d to %d (%d writes in %v) while the API server served the store at %d\n",
				from, now, total, time.Since(start).Round(time.Millisecond), target)
			return m.compactWhileServing(ctx, now)
		}
	}
}

// compactWhileServing compacts etcd at rev, physically, while the API server
// still serves the store: nothing reads etcd's history below the revision the
// undo ends at, and a compaction's cost grows with the revisions below it (the
// raise writes one per revision: half a million revisions took ~10 s to
// compact), so catch-up's own compaction, in the downtime, covers only the
// last few.
func (m *Mover) compactWhileServing(ctx context.Context, rev int64) error {
	t0 := time.Now()
	if _, err := m.backEtcd.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrCompacted) {
		return fmt.Errorf("compact etcd at %d: %w", rev, err)
	}
	fmt.Fprintf(m.Out, "  etcd compacted at %d in %v while the API server served the store\n", rev, time.Since(t0).Round(time.Millisecond))
	return nil
}

// currentRevision is the revision of the etcd API cli talks to.
func (m *Mover) currentRevision(ctx context.Context, cli *clientv3.Client) (int64, error) {
	resp, err := cli.Get(ctx, "health")
	if err != nil {
		return 0, fmt.Errorf("read the revision of %v: %w", cli.Endpoints(), err)
	}
	return resp.Header.Revision, nil
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

// catchUpRounds bounds undoCatchUpDo's rounds: each one that finds the
// stopped store past the revision it copied lost a race with one lease
// expiry (a second or so), so a third is already unlikely.
const catchUpRounds = 5

// undoCatchUpDo, with the API server stopped, brings etcd level with the
// store's last revision R: through the follower started by copy-back (a
// few revisions), or, in a run that recovers from a crash, by a merge at R.
// The store then stops: with no client it still changes by itself when one
// of its leases expires (the API server's 15 s master lease, while the API
// server restarts on etcd), and a revision past R would be one no undo
// copied. So it is stopped here and its revision read from disk; if a
// lease expired in between, it is started and caught up again. Then etcd's
// revision is raised above R and compacted there. A rollback from here
// (undoStopUndo) starts the store again.
func (m *Mover) undoCatchUpDo(ctx context.Context) error {
	var rev int64
	for round := 1; ; round++ {
		r, err := m.catchUpRound(ctx)
		if err != nil {
			return err
		}
		if err := systemd.Stop(ctx, UnitName); err != nil {
			return err
		}
		onDisk := m.storeRevision(ctx)
		if onDisk == r {
			rev = r
			break
		}
		if round == catchUpRounds {
			return fmt.Errorf("the store kept changing after its API server stopped (revision %d after %d copied, %d times); something else writes to it", onDisk, r, round)
		}
		fmt.Fprintf(m.Out, "  the store moved on to revision %d while it stopped (a lease expired); copying that too\n", onDisk)
		if err := systemd.Start(ctx, UnitName); err != nil {
			return err
		}
		if err := m.waitStore(ctx); err != nil {
			return err
		}
	}
	etcd, err := m.Paths.Dial(m.endpoint)
	if err != nil {
		return err
	}
	defer etcd.Close()
	final, err := sealEtcd(ctx, etcd, rev)
	if err != nil {
		return err
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
	fmt.Fprintf(m.Out, "  etcd holds the store's revision %d; etcd's revision is %d, compacted there\n", rev, final)
	return nil
}

// catchUpRound makes etcd hold the store's keys at the store's current
// revision, which it returns.
func (m *Mover) catchUpRound(ctx context.Context) (int64, error) {
	store, etcd, err := m.dialBoth()
	if err != nil {
		return 0, err
	}
	defer store.Close()
	defer etcd.Close()
	rev, err := m.currentRevision(ctx, store)
	if err != nil {
		return 0, err
	}
	return rev, m.catchUpBack(ctx, store, etcd, rev)
}

// catchUpBack makes etcd hold the store's keys at its final revision rev.
func (m *Mover) catchUpBack(ctx context.Context, store, etcd *clientv3.Client, rev int64) error {
	if m.back != nil {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := m.back.CatchUp(cctx, rev)
		cancel()
		m.stopFollow()
		if err == nil {
			fmt.Fprintf(m.Out, "  the store's last changes are in etcd (revision %d)\n", rev)
			return nil
		}
		m.Log.Warn("following the store fell behind; merging instead", "err", err)
	}
	puts, dels, err := newBackCopier(store, etcd).Merge(ctx, rev)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Out, "  etcd holds the store's keys as of revision %d: %d written, %d deleted\n", rev, puts, dels)
	return nil
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

func (m *Mover) stopFollow() {
	if m.followStop != nil {
		m.followStop()
		<-m.followDone
		m.followStop = nil
	}
}
