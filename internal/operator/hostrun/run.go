package hostrun

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Runner runs or follows one Target on the host.
type Runner struct {
	Target
	// Root is the host's root as seen from here (HostRoot in a pod).
	Root string
	// Since: a run that started before it belongs to an earlier attempt of
	// the operator's step and is not reported as this step's result.
	Since time.Time
	// CheckOnly reports the journal's state and starts nothing.
	CheckOnly bool
	// PreflightOnly runs the install's checks that need no drained node
	// (`install SUBJECT --preflight`) and reports done or refused; it starts
	// and changes nothing.
	PreflightOnly bool
	// Poll is the follow interval (default 1 s).
	Poll time.Duration
	Log  *slog.Logger
	// Self is the binary to put on the host (default /proc/self/exe).
	Self string
	// HostCommand runs a command on the host; the default chroots into Root.
	HostCommand func(ctx context.Context, name string, args ...string) ([]byte, error)
}

// Run reads the journal, starts the unit unless a run is active or the goal
// already stands, and follows the run to its end.
func (r *Runner) Run(ctx context.Context) (Result, error) {
	if err := r.Validate(); err != nil {
		return Result{}, err
	}
	r.defaults()
	res := Result{Subject: r.Subject, Op: r.Op}
	if r.PreflightOnly {
		return r.preflight(ctx)
	}
	if !r.CheckOnly {
		if done := r.settleOpposite(ctx); !done {
			res.State = StateStarted // the pod's context ended while waiting; a later attempt goes on
			return res, nil
		}
	}
	lr, err := readLastRun(r.hostPath(r.Journal()))
	if err != nil {
		return res, err
	}
	active := r.unitActive(ctx)
	switch {
	case !active && lr.satisfied(r.Op):
		if reason := r.verify(ctx); reason != "" {
			res.State, res.Detail = StateRefused, reason
			return res, nil
		}
		res.State, res.Detail = StateDone, r.measurement()
		return res, nil
	case !active && lr.Op == r.Op && lr.Finished == "rolled-back" && lr.Started.After(r.Since):
		res.State, res.Detail = StateRolledBack, lr.Failure
		return res, nil
	case r.CheckOnly && active:
		res.State = StateRunning
		return res, nil
	case r.CheckOnly:
		res.State = StateNone
		return res, nil
	}
	if !active {
		if err := r.start(ctx); err != nil {
			return res, err
		}
	} else {
		r.Log.Info("following a run already active", "unit", r.Unit())
	}
	return r.follow(ctx)
}

func (r *Runner) defaults() {
	if r.Poll == 0 {
		r.Poll = time.Second
	}
	if r.Log == nil {
		r.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if r.Self == "" {
		r.Self = "/proc/self/exe"
	}
	if r.HostCommand == nil {
		r.HostCommand = r.chrootCommand
	}
}

func (r *Runner) hostPath(p string) string { return filepath.Join(r.Root, p) }

// start puts this binary on the host and starts the transient unit.
func (r *Runner) start(ctx context.Context) error {
	bin, err := r.installSelf()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(r.hostPath(r.Output())), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(r.Output()), err)
	}
	// The unit outlives this pod: it is started by the host's systemd, in
	// its own cgroup, so a pod killed by the runtime swap leaves it running.
	args := []string{
		"--unit=" + r.Unit(), "--collect", "--service-type=exec",
		"--property=StandardOutput=append:" + r.Output(),
		"--property=StandardError=append:" + r.Output(),
		"--", bin, r.Op, r.Subject,
	}
	if r.Subject == "runtime" {
		// install runtime's unit runs the binary it is given (it does not
		// copy itself): the content-keyed copy stays in place.
		args = append(args, "--binary="+bin)
		// It refuses a node where any pod still runs, this host pod
		// included: start it from a timer, after this pod has exited.
		args = append([]string{"--on-active=" + RuntimeStartDelay.String(), "--timer-property=AccuracySec=1s"}, args...)
	}
	out, err := r.HostCommand(ctx, "systemd-run", args...)
	if err != nil {
		return fmt.Errorf("systemd-run %s on the host: %w (%s)", r.Unit(), err, strings.TrimSpace(string(out)))
	}
	r.Log.Info("started", "unit", r.Unit(), "binary", bin, "output", r.Output())
	return nil
}

// follow waits until the unit is gone, then reads the journal's verdict.
func (r *Runner) follow(ctx context.Context) (Result, error) {
	res := Result{Subject: r.Subject, Op: r.Op}
	t := time.NewTicker(r.Poll)
	defer t.Stop()
	for r.unitActive(ctx) {
		select {
		case <-ctx.Done():
			res.State = StateStarted
			return res, nil
		case <-t.C:
		}
	}
	lr, err := readLastRun(r.hostPath(r.Journal()))
	if err != nil {
		return res, err
	}
	switch {
	case lr.satisfied(r.Op):
		res.State, res.Detail = StateDone, r.measurement()
	case lr.Finished == "rolled-back" && lr.Started.After(r.Since):
		res.State, res.Detail = StateRolledBack, lr.Failure
	case !lr.Started.After(r.Since):
		// The command exited before it began a run: a refusal, whose one
		// line is the last of its output.
		res.State, res.Detail = StateRefused, r.lastOutputLine()
	default:
		return res, fmt.Errorf("%s exited without finishing its journal %s; see %s on the host", r.Unit(), r.Journal(), r.Output())
	}
	return res, nil
}

// settleOpposite makes sure the opposite operation on the same subject is
// not about to run behind this one: a timer still waiting to start it is
// stopped (that run never begins), and a run already going is waited for
// (the installers' lock would refuse us anyway, and its end is what we
// undo or redo). It reports false if ctx ended first.
func (r *Runner) settleOpposite(ctx context.Context) bool {
	other := Target{Subject: r.Subject, Op: "undo"}
	if r.Op == "undo" {
		other.Op = "install"
	}
	if out, err := r.HostCommand(ctx, "systemctl", "stop", other.Unit()+".timer"); err != nil {
		r.Log.Debug("stop timer", "unit", other.Unit(), "err", err, "out", strings.TrimSpace(string(out)))
	}
	t := time.NewTicker(r.Poll)
	defer t.Stop()
	for r.isActive(ctx, other.Unit()+".service") {
		r.Log.Info("waiting for the opposite run to end", "unit", other.Unit())
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// RuntimeStartDelay is how long after its host pod a runtime unit starts.
var RuntimeStartDelay = 10 * time.Second

// unitActive reports whether the unit runs, or its timer waits to start it.
func (r *Runner) unitActive(ctx context.Context) bool {
	return r.isActive(ctx, r.Unit()+".service", r.Unit()+".timer")
}

// isActive reports whether any of the units is active (or changing state).
func (r *Runner) isActive(ctx context.Context, units ...string) bool {
	out, _ := r.HostCommand(ctx, "systemctl", append([]string{"is-active"}, units...)...)
	for _, s := range strings.Fields(string(out)) {
		if s == "active" || s == "activating" || s == "deactivating" || s == "reloading" {
			return true
		}
	}
	return false
}

// measurement is the last "downtime" line of the run's output, if any.
func (r *Runner) measurement() string {
	f, err := os.Open(r.hostPath(r.Output()))
	if err != nil {
		return ""
	}
	defer f.Close()
	var last string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "downtime") {
			last = strings.TrimSpace(sc.Text())
		}
	}
	return last
}

// installSelf copies this binary to BinaryDir on the host under a name keyed
// by its content (written beside, then renamed) and returns its host path.
func (r *Runner) installSelf() (string, error) {
	data, err := os.ReadFile(r.Self)
	if err != nil {
		return "", fmt.Errorf("read own binary %s: %w", r.Self, err)
	}
	sum := sha256.Sum256(data)
	hostBin := filepath.Join(BinaryDir, "quantykube-"+hex.EncodeToString(sum[:6]))
	dst := r.hostPath(hostBin)
	if _, err := os.Stat(dst); err == nil {
		return hostBin, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", fmt.Errorf("create %s on the host: %w", BinaryDir, err)
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, 0o755); err != nil {
		return "", fmt.Errorf("write %s on the host: %w", hostBin, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", fmt.Errorf("rename %s on the host: %w", hostBin, err)
	}
	return hostBin, nil
}

func (r *Runner) chrootCommand(ctx context.Context, name string, args ...string) ([]byte, error) {
	// exec would look name up in this container's PATH; look it up on the host.
	path := name
	for _, dir := range []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		if _, err := os.Stat(filepath.Join(r.Root, dir, name)); err == nil {
			path = filepath.Join(dir, name)
			break
		}
	}
	if !strings.Contains(path, "/") {
		return nil, fmt.Errorf("%s not found on the host", name)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: r.Root}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return cmd.CombinedOutput()
}
