package storemove

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/staticpod"
	"github.com/quantyroot/quantykube/internal/install/systemd"
)

// When the API server was pointed away from the store behind QuantyKube's
// back (a DivergedError), the two sides hold different writes and no merge
// is safe. The person chooses: Reattach keeps the store's data (the API
// server goes back onto it; etcd's writes since are dropped, saved to a
// snapshot file first), Release keeps etcd's (the store is stopped and its
// data set aside, never deleted).

// Reattach puts the API server back onto the store after it was pointed
// away behind QuantyKube's back.
func (m *Mover) Reattach(ctx context.Context, dryRun bool) error {
	m.defaults()
	if dryRun {
		return m.subject().DryRun(ctx, install.OpReattach)
	}
	defer m.closeAll()
	ran, err := m.subject().Execute(ctx, install.OpReattach)
	if err != nil || !ran {
		return err
	}
	fmt.Fprintf(m.Out, "reattached: the API server runs on the store again; API-server downtime %v\n", m.Downtime.Round(time.Millisecond))
	return nil
}

// Release accepts etcd's data after the API server was pointed back at etcd
// behind QuantyKube's back: the store stops, its data is set aside.
func (m *Mover) Release(ctx context.Context, dryRun bool) error {
	if dryRun {
		return m.subject().DryRun(ctx, install.OpRelease)
	}
	_, err := m.subject().Execute(ctx, install.OpRelease)
	return err
}

// preflightDiverged lets reattach and release run only where the journal
// says installed and the API server's manifest points elsewhere.
func (m *Mover) preflightDiverged(ctx context.Context, op string) error {
	var d *DivergedError
	if err := m.stands(ctx); !errors.As(err, &d) {
		if err != nil {
			return err
		}
		return fmt.Errorf("the API server runs on the store as the journal says; nothing to %s", op)
	}
	if d.EtcdRev < 0 {
		return fmt.Errorf("etcd at %s does not answer; %s needs it (check the etcd static pod)", d.Endpoint, op)
	}
	m.endpoint = d.Endpoint
	if op == install.OpReattach && d.StoreRev < 0 {
		return errors.New("the store's data cannot be read; reattach needs it (check journalctl -u quantykube-store)")
	}
	return nil
}

func (m *Mover) reattachPlan() *install.Plan {
	return &install.Plan{Op: install.OpReattach, Steps: []install.Step{
		{Name: "save-etcd", Impact: "none: a snapshot of etcd, with the writes made there since it was pointed back, is saved under the state dir",
			Do: m.saveDivergedEtcdDo},
		{Name: "start-store", Impact: "none: the quantykube-store unit runs (started if it was stopped)",
			Do: m.ensureStoreDo},
		{Name: "stop-apiserver", Impact: "the API server stops: requests fail until switch-apiserver",
			Do: m.reattachStopDo, Undo: m.reattachStopUndo},
		{Name: "switch-apiserver", Commit: true, Impact: "the API server starts again on the store: its current manifest with --etcd-servers on the store",
			Do: m.reattachSwitchDo},
		{Name: "kubeadm-config", Impact: "none: kubeadm's ClusterConfiguration names the store as external etcd",
			Do: m.recordStoreDo},
		m.leadersStep(),
	}}
}

func (m *Mover) saveDivergedEtcdDo(ctx context.Context) error {
	return m.Paths.saveAndPrune(ctx, m.Out, m.endpoint, "etcd-before-reattach", "etcd, with the writes made there since it was pointed back,")
}

// ensureStoreDo starts the store's unit unless it runs.
func (m *Mover) ensureStoreDo(ctx context.Context) error {
	if !systemd.Active(ctx, UnitName) {
		if err := InstallBinary(m.Paths.Binary); err != nil {
			return err
		}
		if err := systemd.Install(ctx, m.storeUnit()); err != nil {
			return err
		}
	}
	m.finalRev = 0
	return m.waitStore(ctx)
}

// reattachStopDo stops the API server that runs on etcd, keeping its
// manifest (kubeadm's current rendering) as the one a later undo restores.
func (m *Mover) reattachStopDo(ctx context.Context) error {
	cur, err := os.ReadFile(m.Paths.APIServerManifest())
	if err == nil {
		if old, rerr := os.ReadFile(m.Paths.savedManifest()); rerr == nil {
			if err := staticpod.WriteAtomic(m.Paths.savedManifest()+".before-reattach", old, 0o600); err != nil {
				return err
			}
		}
		if err := staticpod.WriteAtomic(m.Paths.savedManifest(), cur, 0o600); err != nil {
			return err
		}
	}
	m.manifest, _ = os.ReadFile(m.Paths.savedManifest())
	m.port = APIServerPort(m.manifest)
	m.stopped = time.Now()
	return m.Paths.StopAPIServer(ctx, m.Paths.savedManifest(), m.port)
}

// reattachStopUndo starts the API server on etcd again, as it was found.
func (m *Mover) reattachStopUndo(ctx context.Context) error { return m.restoreEtcdManifest(ctx) }

func (m *Mover) reattachSwitchDo(ctx context.Context) error {
	if err := m.switchDo(ctx); err != nil {
		return err
	}
	if err := m.apiserverReadyDo(ctx); err != nil {
		return err
	}
	h, err := m.Paths.readHandover()
	if err != nil {
		return err
	}
	h.UndoneAt = 0
	return m.Paths.writeHandover(h)
}

func (m *Mover) releasePlan() *install.Plan {
	return &install.Plan{Op: install.OpRelease, Steps: []install.Step{
		{Name: "kubeadm-config", Impact: "none: kubeadm's ClusterConfiguration names etcd (if it named the store)",
			Do: m.restoreClusterConfigDo},
		{Name: "set-aside", Impact: "none: the quantykube-store unit stops; its data dir is renamed, not deleted",
			Do: m.setAsideDo},
	}}
}

// setAsideDo stops the store and renames its data dir beside itself.
func (m *Mover) setAsideDo(ctx context.Context) error {
	if err := systemd.Remove(ctx, UnitName); err != nil {
		return err
	}
	if _, err := os.Stat(m.Paths.DataDir); errors.Is(err, os.ErrNotExist) {
		return nil // set aside already
	}
	aside := fmt.Sprintf("%s.set-aside-%s", m.Paths.DataDir, time.Now().UTC().Format("20060102T150405Z"))
	if err := os.Rename(m.Paths.DataDir, aside); err != nil {
		return fmt.Errorf("set the store's data aside: %w", err)
	}
	fmt.Fprintf(m.Out, "  the store's data is set aside in %s (serve it again with `quantykube store --data-dir %s`, or delete it)\n", aside, aside)
	return nil
}

// refuseNewerData is install's guard for a store data dir that holds
// revisions neither the last move nor the last undo accounted for (the
// store served after an undo, behind QuantyKube's back): install would wipe
// it, so it refuses instead.
func (m *Mover) refuseNewerData(ctx context.Context) error {
	if _, err := os.Stat(m.Paths.DataDir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if systemd.Active(ctx, UnitName) {
		return fmt.Errorf("the quantykube-store unit runs although no move is recorded; stop it (systemctl stop %s) after checking what serves on it, then retry", UnitName)
	}
	h, err := m.Paths.readHandover()
	if err != nil {
		return err
	}
	rev := m.storeRevision(ctx)
	if known := max(h.MovedAt, h.UndoneAt); h.MovedAt != 0 && rev > known {
		return fmt.Errorf("the store's data dir %s holds revisions %d–%d that no undo copied into etcd; nothing was changed. Move it away (mv %s %s.old) to start a new move, or serve it again with `quantykube store --data-dir %s`",
			m.Paths.DataDir, known+1, rev, m.Paths.DataDir, m.Paths.DataDir, m.Paths.DataDir)
	}
	return nil
}
