package runtimemove

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/staticpod"
	"github.com/quantyroot/quantykube/internal/install/systemd"
	rtcli "github.com/quantyroot/quantykube/internal/runtime/cli"
)

var metaGet = metav1.GetOptions{}

// Mover runs install runtime and undo runtime on this node.
type Mover struct {
	Paths Paths
	Log   *slog.Logger
	Out   io.Writer
	// NodeName is the node's name in the API (default: the host name).
	NodeName string
	// ReadyTimeout bounds the wait for the node after the kubelet starts.
	ReadyTimeout time.Duration
	// Faults injects failures for tests (install.FaultsFromEnv); nil in production.
	Faults install.Faults
	// NoPrepull skips copying the pods' images into quantykube runtime
	// before the kubelet stops: the pods pull them when they restart, so
	// they are only as fast as the node's registry (and fail to start
	// without one). The prepull step stays in the plan and the journal, as
	// a no-op, so a rerun with or without the flag recovers the same plan.
	NoPrepull bool

	meta         *meta
	cs           *kubernetes.Clientset
	kubeletStop  time.Time
	NotReadyTime time.Duration
}

func (m *Mover) defaults() {
	if m.ReadyTimeout == 0 {
		m.ReadyTimeout = 4 * time.Minute
	}
	if m.NodeName == "" {
		m.NodeName, _ = m.Paths.nodeName()
	}
}

func (m *Mover) client() (*kubernetes.Clientset, error) {
	if m.cs == nil {
		cs, err := m.Paths.apiClient()
		if err != nil {
			return nil, err
		}
		m.cs = cs
	}
	return m.cs, nil
}

// subject wires the node's runtime into the shared install/undo flow.
func (m *Mover) subject() *install.Subject {
	j, _ := install.OpenJournal(m.Paths.journal())
	return &install.Subject{
		Name: "runtime", Journal: j, LockPath: m.Paths.lockFile(), Log: m.Log, Out: m.Out, Faults: m.Faults,
		Plan: func(op string) *install.Plan {
			if op == "undo" {
				return m.undoPlan()
			}
			return m.installPlan()
		},
		Preflight: m.preflight,
		Load: func() (err error) {
			m.meta, err = m.Paths.readMeta()
			return err
		},
		Prepare: m.prepare,
	}
}

func (m *Mover) preflight(ctx context.Context, op string) error {
	if op == "undo" {
		var err error
		if m.meta, err = m.Paths.readMeta(); err != nil {
			return err
		}
		if _, err := os.Stat(m.Paths.savedConfig()); err != nil {
			return fmt.Errorf("the original kubelet config %s is missing; cannot go back to %s safely", m.Paths.savedConfig(), m.meta.OldRuntime)
		}
		if _, err := runtimeName(ctx, m.meta.OldEndpoint); err != nil {
			return fmt.Errorf("%v; start %s first (undo moves the node back onto it)", err, m.meta.OldRuntime)
		}
		return nil
	}
	mt, err := m.Paths.preflight(ctx, m.NodeName, false)
	if err != nil {
		return err
	}
	m.meta = mt
	return systemd.Available(ctx)
}

// prepare records the facts of a fresh install; the saved originals of an
// earlier install are stale.
func (m *Mover) prepare(ctx context.Context, op string) error {
	if op != "install" {
		return nil
	}
	if err := os.RemoveAll(m.Paths.savedDir()); err != nil {
		return fmt.Errorf("clear %s: %w", m.Paths.savedDir(), err)
	}
	return m.Paths.writeMeta(m.meta)
}

// Preflight runs install's checks that hold before the node is drained,
// changing nothing: what the operator asks before it cordons the node.
func (m *Mover) Preflight(ctx context.Context) error {
	m.defaults()
	if _, err := m.Paths.preflight(ctx, m.NodeName, true); err != nil {
		return err
	}
	if err := systemd.Available(ctx); err != nil {
		return err
	}
	fmt.Fprintln(m.Out, "preflight: ok (the node may be drained and moved)")
	return nil
}

// Install moves the kubelet onto quantykube runtime. With dryRun it prints
// the preflight verdict and the plan and changes nothing; a failed preflight
// is its error.
func (m *Mover) Install(ctx context.Context, dryRun bool) error {
	m.defaults()
	if m.NoPrepull && m.Paths.ImageArchives != "" {
		return fmt.Errorf("--image-archives %s is only read by the prepull, which --no-prepull skips: drop one of the two flags", m.Paths.ImageArchives)
	}
	if dryRun {
		err := m.subject().DryRun(ctx, "install")
		if err == nil && m.meta != nil {
			fmt.Fprintf(m.Out, "node %s on %s at %s, cgroup driver %s\n", m.meta.Node, m.meta.OldRuntime, m.meta.OldEndpoint, m.meta.CgroupDriver)
		}
		return err
	}
	ran, err := m.subject().Execute(ctx, "install")
	if err != nil || !ran {
		return err
	}
	fmt.Fprintf(m.Out, "installed: node %s runs on quantykube runtime (%s); NotReady for %v; %s's state is untouched\n",
		m.meta.Node, m.meta.NewEndpoint, m.NotReadyTime.Round(time.Millisecond), m.meta.OldRuntime)
	return nil
}

func (m *Mover) installPlan() *install.Plan {
	restart := "no pods"
	old := "the old runtime"
	if m.meta != nil {
		if len(m.meta.Restart) > 0 {
			restart = strings.Join(m.meta.Restart, ", ")
		}
		old = m.meta.OldRuntime
	}
	return &install.Plan{Op: "install", Steps: []install.Step{
		{Name: "carry-registries", Impact: m.carryImpact(), Do: m.carryDo, Undo: m.carryUndo},
		{Name: "start-runtime", Impact: "none: the quantykube-runtime unit starts beside " + old,
			Do: m.startRuntimeDo, Undo: m.removeRuntime},
		{Name: "prepull", Impact: m.prepullImpact(), Do: m.prepullDo},
		{Name: "stop-kubelet", Impact: "the kubelet stops: the node goes NotReady after its grace period; pods keep running",
			Do: m.stopKubelet, Undo: m.startKubeletOld},
		{Name: "remove-old-pods", Impact: "pods stop: " + restart + " (they restart on quantykube runtime)",
			Do: m.removeOldPodsDo},
		{Name: "switch-kubelet", Impact: "none while the kubelet is stopped: its runtime endpoint (and cgroup driver) point at quantykube runtime; originals kept",
			Do: m.switchDo, Undo: m.restoreKubeletFiles},
		{Name: "start-kubelet", Commit: true, Impact: "the kubelet starts on quantykube runtime: " + restart + " start again; done when the node is Ready",
			Do: m.startKubeletNew, Undo: m.stopKubeletClearNew},
	}}
}

func systemctl(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "systemctl", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("systemctl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (m *Mover) runtimeUnit() systemd.Unit {
	return systemd.Unit{Name: UnitName, Content: rtcli.SystemdUnit(m.Paths.Binary, m.Paths.RuntimeConfig)}
}

// A started runtime unit answers the CRI within runtimeAnswerTimeout; polled
// every runtimePoll. An API call the move needs is retried every apiRetry.
const (
	runtimeAnswerTimeout = 30 * time.Second
	runtimePoll          = 300 * time.Millisecond
	apiRetry             = time.Second
)

func (m *Mover) startRuntimeDo(ctx context.Context) error {
	if err := systemd.Install(ctx, m.runtimeUnit()); err != nil {
		return err
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, runtimePoll, runtimeAnswerTimeout, true, func(ctx context.Context) (bool, error) {
		name, err := runtimeName(ctx, m.meta.NewEndpoint)
		if last = err; err != nil {
			return false, nil
		}
		if name != RuntimeName {
			return false, fmt.Errorf("%s answers as %q, not %s", m.meta.NewEndpoint, name, RuntimeName)
		}
		return true, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("quantykube runtime did not answer on %s within %v: %w (see journalctl -u %s)", m.meta.NewEndpoint, runtimeAnswerTimeout, last, UnitName)
	}
	return err
}

// removeRuntime stops, disables and removes the runtime's unit; the pods it
// ran are removed first (its data stays for inspection).
func (m *Mover) removeRuntime(ctx context.Context) error {
	if systemd.Active(ctx, UnitName) {
		if _, err := removeAllPods(ctx, m.meta.NewEndpoint); err != nil {
			m.Log.Warn("remove quantykube runtime's pods", "err", err)
		}
	}
	return systemd.Remove(ctx, UnitName)
}

func (m *Mover) prepullImpact() string {
	if m.NoPrepull {
		return "skipped (--no-prepull): the static and DaemonSet pods pull their images through quantykube runtime's registry mirrors when they restart, so they stay down longer"
	}
	return "none: the images of the static and DaemonSet pods are copied into quantykube runtime"
}

func (m *Mover) prepullDo(ctx context.Context) error {
	if m.NoPrepull {
		m.Log.Info("prepull skipped (--no-prepull)")
		fmt.Fprintln(m.Out, "  skipped (--no-prepull): the pods pull their images when they restart")
		return nil
	}
	return m.prepull(ctx, m.meta.Images)
}

func (m *Mover) stopKubelet(ctx context.Context) error {
	m.kubeletStop = time.Now()
	return systemctl(ctx, "stop", "kubelet.service")
}

// stopKubeletClearNew stops the kubelet and removes the pods it started on
// quantykube runtime (they hold host ports the old runtime's pods need).
func (m *Mover) stopKubeletClearNew(ctx context.Context) error {
	if err := m.stopKubelet(ctx); err != nil {
		return err
	}
	if !systemd.Active(ctx, UnitName) {
		return nil
	}
	_, err := removeAllPods(ctx, m.meta.NewEndpoint)
	return err
}

func (m *Mover) removeOldPodsDo(ctx context.Context) error {
	n, err := removeAllPods(ctx, m.meta.OldEndpoint)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Out, "  removed %d pods from %s\n", n, m.meta.OldRuntime)
	return nil
}

// saveOriginals copies the kubelet's files into StateDir unless an earlier
// (interrupted) attempt of this run already did: the first copy is the original.
func (m *Mover) saveOriginals() error {
	if _, err := os.Stat(m.Paths.savedConfig()); err == nil {
		return nil
	}
	if err := os.MkdirAll(m.Paths.savedDir(), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", m.Paths.savedDir(), err)
	}
	if b, err := os.ReadFile(m.Paths.KubeletFlags); err == nil {
		if err := staticpod.WriteAtomic(m.Paths.savedFlags(), b, 0o600); err != nil {
			return err
		}
	} else if errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(m.Paths.savedFlagsAbsent(), nil, 0o600); err != nil {
			return err
		}
	} else {
		return fmt.Errorf("read %s: %w", m.Paths.KubeletFlags, err)
	}
	b, err := os.ReadFile(m.Paths.KubeletConfig)
	if err != nil {
		return fmt.Errorf("read %s: %w", m.Paths.KubeletConfig, err)
	}
	// config.yaml last: its copy marks the set complete.
	return staticpod.WriteAtomic(m.Paths.savedConfig(), b, 0o600)
}

// switchDo rewrites the kubelet's files from the saved originals, so a rerun
// computes the same bytes.
func (m *Mover) switchDo(ctx context.Context) error {
	if err := m.saveOriginals(); err != nil {
		return err
	}
	saved := m.Paths
	saved.KubeletConfig, saved.KubeletFlags = m.Paths.savedConfig(), m.Paths.savedFlags()
	k, err := saved.readKubelet()
	if err != nil {
		return fmt.Errorf("the saved kubelet files: %w", err)
	}
	cfg, flags := k.switched(m.meta.NewEndpoint)
	if err := staticpod.WriteAtomic(m.Paths.KubeletConfig, cfg, fileMode(m.Paths.KubeletConfig)); err != nil {
		return err
	}
	if k.EndpointInFlags {
		if err := staticpod.WriteAtomic(m.Paths.KubeletFlags, flags, fileMode(m.Paths.KubeletFlags)); err != nil {
			return err
		}
	}
	if m.meta.Annotation != nil {
		cs, err := m.client()
		if err != nil {
			return err
		}
		if err := setCRISocketAnnotation(ctx, cs, m.meta.Node, m.meta.NewEndpoint); err != nil {
			return err
		}
	}
	return nil
}

// restoreKubeletFiles writes the saved originals back byte for byte and the
// node's annotation back.
func (m *Mover) restoreKubeletFiles(ctx context.Context) error {
	cfg, err := os.ReadFile(m.Paths.savedConfig())
	if errors.Is(err, os.ErrNotExist) {
		return nil // never saved, so never changed
	}
	if err != nil {
		return fmt.Errorf("read the saved kubelet config: %w", err)
	}
	if flags, err := os.ReadFile(m.Paths.savedFlags()); err == nil {
		if err := staticpod.WriteAtomic(m.Paths.KubeletFlags, flags, fileMode(m.Paths.KubeletFlags)); err != nil {
			return err
		}
	} else if _, err := os.Stat(m.Paths.savedFlagsAbsent()); err == nil {
		if err := os.Remove(m.Paths.KubeletFlags); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", m.Paths.KubeletFlags, err)
		}
	}
	if err := staticpod.WriteAtomic(m.Paths.KubeletConfig, cfg, fileMode(m.Paths.KubeletConfig)); err != nil {
		return err
	}
	if m.meta.Annotation != nil {
		cs, err := m.client()
		if err != nil {
			return err
		}
		// The API server may be down on a control-plane node until the kubelet is back.
		return retryFor(ctx, 3*time.Minute, func() error { return setCRISocketAnnotation(ctx, cs, m.meta.Node, *m.meta.Annotation) })
	}
	return nil
}

func fileMode(path string) os.FileMode {
	if st, err := os.Stat(path); err == nil {
		return st.Mode().Perm()
	}
	return 0o644
}

// startKubeletOld starts the kubelet on the files now in place (the
// originals, in a rollback) and waits for the node on the old runtime.
func (m *Mover) startKubeletOld(ctx context.Context) error {
	return m.startKubelet(ctx, m.meta.OldRuntime)
}

func (m *Mover) startKubeletNew(ctx context.Context) error {
	return m.startKubelet(ctx, RuntimeName)
}

func (m *Mover) startKubelet(ctx context.Context, runtime string) error {
	started := time.Now()
	if err := systemctl(ctx, "restart", "kubelet.service"); err != nil {
		return err
	}
	cs, err := m.client()
	if err != nil {
		return err
	}
	if err := waitReadyOn(ctx, cs, m.meta.Node, runtime, started, m.ReadyTimeout); err != nil {
		return err
	}
	if !m.kubeletStop.IsZero() {
		m.NotReadyTime = time.Since(m.kubeletStop)
		fmt.Fprintf(m.Out, "  node Ready on %s %v after the kubelet stopped\n", runtime, m.NotReadyTime.Round(time.Millisecond))
	}
	return nil
}

func retryFor(ctx context.Context, d time.Duration, f func() error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, apiRetry, d, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	})
	if wait.Interrupted(err) && last != nil {
		return last
	}
	return err
}
