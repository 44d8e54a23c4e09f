package hostrun

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/internal/install"
)

// DefaultPoll is how often a host pod asks systemd whether a unit still runs.
const DefaultPoll = time.Second

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
	// Poll is the follow interval (default DefaultPoll).
	Poll time.Duration
	Log  *slog.Logger
	// Self is the binary to put on the host (default /proc/self/exe).
	Self string
	// Etcdutl is etcd's etcdutl to put on the host for the HA undo's steps
	// (default ImageEtcdutl; skipped when absent).
	Etcdutl string
	// HostCommand runs a command on the host; the default chroots into Root.
	HostCommand func(ctx context.Context, name string, args ...string) ([]byte, error)
}

// Run reads the journal, starts the unit unless a run is active or the goal
// already stands, and follows the run to its end. When ctx ends while it
// waits (the pod detached, or was killed) it reports StateStarted: a later
// host pod goes on from the journal.
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
		if err := r.settleOpposite(ctx); err != nil {
			if ctx.Err() != nil {
				res.State = StateStarted // cut short while waiting; a later attempt goes on
				return res, nil
			}
			return res, err
		}
	}
	lr, err := readLastRun(r.hostPath(r.Journal()))
	if err != nil {
		return res, err
	}
	active, err := r.unitActive(ctx)
	if err != nil {
		return res, err
	}
	switch {
	case !active && r.HA != "" && lr.Finished == install.EventDone && lr.Started.After(r.Since):
		// Done in this step (an earlier pod of it saw it through). A done
		// from before the step is not trusted here: it may belong to an
		// earlier move of the node; the host command decides (haDone).
		res.State, res.Detail = StateDone, r.measurement()
		return res, nil
	case !active && r.HA == "" && lr.satisfied(r.Op):
		if reason := r.verify(ctx); reason != "" {
			res.State, res.Detail = StateRefused, reason
			return res, nil
		}
		res.State, res.Detail = StateDone, r.measurement()
		return res, nil
	case !active && (lr.Op == r.Op || r.HA != "") && r.rolledBackThisStep(lr):
		res.State, res.Detail = StateRolledBack, lr.Failure
		return res, nil
	case r.CheckOnly && active:
		res.State = StateRunning
		return res, nil
	case r.CheckOnly:
		res.State = StateNone
		return res, nil
	}
	if active {
		r.Log.Info("following a run already active", "unit", r.Unit())
	} else if err := r.start(ctx); err != nil {
		return res, err
	}
	return r.follow(ctx)
}

// rolledBackThisStep reports whether the journal's last run rolled back
// after the operator's step began.
func (r *Runner) rolledBackThisStep(lr lastRun) bool {
	return lr.Finished == install.EventRolledBack && lr.Started.After(r.Since)
}

func (r *Runner) defaults() {
	if r.Poll == 0 {
		r.Poll = DefaultPoll
	}
	if r.Log == nil {
		r.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if r.Self == "" {
		r.Self = "/proc/self/exe"
	}
	if r.Etcdutl == "" {
		r.Etcdutl = ImageEtcdutl
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
		"--", bin, string(r.Op), string(r.Subject),
	}
	if r.HA != "" {
		args = append(args, "--ha="+r.HA)
		eu, err := r.etcdutlArgs()
		if err != nil {
			return err
		}
		args = append(args, eu...)
	}
	if r.Subject == v1.SubjectRuntime {
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
	err := wait.PollUntilContextCancel(ctx, r.Poll, true, func(ctx context.Context) (bool, error) {
		active, err := r.unitActive(ctx)
		return !active, err
	})
	if err != nil && ctx.Err() != nil {
		res.State = StateStarted // following was cut short; the unit goes on
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("follow %s: %w", r.Unit(), err)
	}
	lr, err := readLastRun(r.hostPath(r.Journal()))
	if err != nil {
		return res, err
	}
	switch {
	case r.HA != "" && r.haDone(lr), r.HA == "" && lr.satisfied(r.Op):
		res.State, res.Detail = StateDone, r.measurement()
	case r.rolledBackThisStep(lr):
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

// haDone reports whether the HA step's host command, which just exited,
// found it done: its journal finished a run started in this step, or the
// command said the step was done already ("STEP is done on NODE; nothing to
// do", hamove.Node.Run, which knows a done of an earlier move of the node
// from one of this move).
func (r *Runner) haDone(lr lastRun) bool {
	if lr.Finished != install.EventDone {
		return false
	}
	return lr.Started.After(r.Since) || strings.HasSuffix(r.lastOutputLine(), "; nothing to do")
}
