package hostrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// RuntimeStartDelay is how long after its host pod a runtime unit starts.
var RuntimeStartDelay = 10 * time.Second

// settleOpposite makes sure the opposite operation on the same subject is
// not about to run behind this one: a timer still waiting to start it is
// stopped (that run never begins), and a run already going is waited for
// (the installers' lock would refuse us anyway, and its end is what we
// undo or redo). It fails if the timer is still waiting after the stop, or
// if ctx ends first.
func (r *Runner) settleOpposite(ctx context.Context) error {
	other := r.Opposite()
	timer := other.Unit() + ".timer"
	if out, err := r.HostCommand(ctx, "systemctl", "stop", timer); err != nil {
		// Stopping a timer that was never made fails too: what matters is
		// that none waits now.
		waiting, aerr := r.isActive(ctx, timer)
		if aerr != nil || waiting {
			return fmt.Errorf("stop %s on the host, so that no %s starts after this %s: %w (%s); is-active: %v",
				timer, other.Op, r.Op, err, strings.TrimSpace(string(out)), aerr)
		}
		r.Log.Debug("no timer to stop", "unit", timer, "out", strings.TrimSpace(string(out)))
	}
	err := wait.PollUntilContextCancel(ctx, r.Poll, true, func(ctx context.Context) (bool, error) {
		running, err := r.isActive(ctx, other.Unit()+".service")
		if running {
			r.Log.Info("waiting for the opposite run to end", "unit", other.Unit())
		}
		return !running, err
	})
	if err != nil {
		return fmt.Errorf("wait for %s to end: %w", other.Unit(), err)
	}
	return nil
}

// unitActive reports whether the unit runs, or its timer waits to start it.
func (r *Runner) unitActive(ctx context.Context) (bool, error) {
	return r.isActive(ctx, r.Unit()+".service", r.Unit()+".timer")
}

// isActive reports whether any of the units is active (or changing state).
// systemctl is-active answers in its output, with a non-zero exit when none
// is active; an error means it gave no answer (it could not run, or ctx
// ended and killed it).
func (r *Runner) isActive(ctx context.Context, units ...string) (bool, error) {
	out, err := r.HostCommand(ctx, "systemctl", append([]string{"is-active"}, units...)...)
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return false, fmt.Errorf("systemctl is-active %s on the host: %w", strings.Join(units, " "), err)
	}
	for _, s := range strings.Fields(string(out)) {
		if s == "active" || s == "activating" || s == "deactivating" || s == "reloading" {
			return true, nil
		}
	}
	return false, nil
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
