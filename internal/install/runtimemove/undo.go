package runtimemove

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/systemd"
)

// Undo moves the kubelet back onto the runtime it ran on before install.
func (m *Mover) Undo(ctx context.Context, dryRun bool) error {
	m.defaults()
	if dryRun {
		m.meta, _ = m.Paths.readMeta()
		(&install.Runner{Log: m.Log}).DryRun(m.Out, m.undoPlan())
		return nil
	}
	if os.Geteuid() != 0 {
		return errors.New("undo runtime must run as root on the node (try sudo)")
	}
	if install.Busy(m.Paths.lockFile()) {
		return fmt.Errorf("%w; wait for it to finish", install.ErrBusy)
	}
	r, err := m.runner()
	if err != nil {
		return err
	}
	st, err := r.Journal.State()
	if err != nil {
		return err
	}
	if st.Op == "" {
		fmt.Fprintln(m.Out, "the runtime is not installed; nothing to undo")
		return nil
	}
	release, err := install.Lock(m.Paths.lockFile())
	if err != nil {
		return err
	}
	defer release()
	if m.meta, err = m.Paths.readMeta(); err != nil {
		return err
	}
	if st.Finished == "" {
		plan := m.undoPlan()
		if st.Op == "install" {
			plan = m.installPlan()
		}
		how, err := r.Recover(ctx, plan)
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Out, "the interrupted %s was %s\n", st.Op, how)
		st, _ = r.Journal.State()
	}
	if !st.Installed {
		fmt.Fprintln(m.Out, "the runtime is not installed; nothing to undo")
		return nil
	}
	if _, err := os.Stat(m.Paths.savedConfig()); err != nil {
		return fmt.Errorf("the original kubelet config %s is missing; cannot go back to %s safely", m.Paths.savedConfig(), m.meta.OldRuntime)
	}
	if _, err := runtimeName(ctx, m.meta.OldEndpoint); err != nil {
		return fmt.Errorf("%v; start %s first (undo moves the node back onto it)", err, m.meta.OldRuntime)
	}
	if err := r.Run(ctx, m.undoPlan()); err != nil {
		return err
	}
	fmt.Fprintf(m.Out, "undone: node %s runs on %s again (%s); NotReady for %v; quantykube runtime's data is kept in %s\n",
		m.meta.Node, m.meta.OldRuntime, m.meta.OldEndpoint, m.NotReadyTime.Round(time.Millisecond), m.meta.RootDir)
	return nil
}

func (m *Mover) undoPlan() *install.Plan {
	old := "the old runtime"
	if m.meta != nil {
		old = m.meta.OldRuntime
	}
	return &install.Plan{Op: "undo", Steps: []install.Step{
		{Name: "stop-kubelet", Impact: "the kubelet stops: the node goes NotReady after its grace period; pods keep running",
			Do: m.stopKubelet, Undo: m.startKubeletNew},
		{Name: "remove-new-pods", Impact: "every pod of quantykube runtime stops (they restart on " + old + ")",
			Do: m.removeNewPodsDo},
		{Name: "restore-kubelet", Impact: "none while the kubelet is stopped: the kubelet's files are restored byte for byte",
			Do: m.restoreKubeletFiles, Undo: m.reapplySwitch},
		{Name: "start-kubelet", Commit: true, Impact: "the kubelet starts on " + old + ": its pods start again; done when the node is Ready",
			Do: m.startKubeletOld, Undo: m.stopKubeletClearOld},
		{Name: "stop-runtime", Impact: "none: the quantykube-runtime unit stops and is disabled; its data stays",
			Do: m.removeRuntime},
	}}
}

func (m *Mover) removeNewPodsDo(ctx context.Context) error {
	if !systemd.Active(ctx, UnitName) {
		return nil
	}
	n, err := removeAllPods(ctx, m.meta.NewEndpoint)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Out, "  removed %d pods from quantykube runtime\n", n)
	return nil
}

// reapplySwitch points the kubelet at quantykube runtime again (a failed
// undo is put back); the unit is started again if a later step stopped it.
func (m *Mover) reapplySwitch(ctx context.Context) error {
	if !systemd.Active(ctx, UnitName) {
		if err := m.startRuntimeDo(ctx); err != nil {
			return err
		}
	}
	return m.switchDo(ctx)
}

// stopKubeletClearOld stops the kubelet and removes the pods it started on
// the old runtime, so they can start on quantykube runtime again.
func (m *Mover) stopKubeletClearOld(ctx context.Context) error {
	if err := m.stopKubelet(ctx); err != nil {
		return err
	}
	_, err := removeAllPods(ctx, m.meta.OldEndpoint)
	return err
}
