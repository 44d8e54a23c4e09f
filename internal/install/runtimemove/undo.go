package runtimemove

import (
	"context"
	"fmt"
	"time"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/systemd"
)

// Undo moves the kubelet back onto the runtime it ran on before install.
func (m *Mover) Undo(ctx context.Context, dryRun bool) error {
	m.defaults()
	if dryRun {
		m.meta, _ = m.Paths.readMeta() // the plan names the old runtime; the preflight reads it again
		return m.subject().DryRun(ctx, "undo")
	}
	ran, err := m.subject().Execute(ctx, "undo")
	if err != nil || !ran {
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
