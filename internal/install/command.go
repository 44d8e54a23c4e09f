package install

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
)

// Subject is what a host command moves (the store, a node's runtime): its
// journal and lock, its plans, and the hooks the shared install/undo flow
// of Execute calls.
type Subject struct {
	// Name is used in messages ("store", "runtime").
	Name     string
	Journal  *Journal
	LockPath string
	Log      *slog.Logger
	Out      io.Writer
	// Plan returns the plan of op ("install" or "undo").
	Plan func(op string) *Plan
	// Preflight checks that a fresh run of op can start, writing nothing.
	Preflight func(ctx context.Context, op string) error
	// Load restores from disk what the steps of a run that began earlier
	// need (recovery runs them in a fresh process).
	Load func() error
	// Prepare runs after the lock is taken, right before a fresh run of op;
	// it may write (for example the facts the steps will need). Optional.
	Prepare func(ctx context.Context, op string) error
}

// Execute runs op ("install" or "undo") the same way for every subject: it
// refuses a second concurrent run; it finishes or puts back a run that was
// interrupted (kill -9, reboot) before anything else; and it runs op unless
// the subject already is where op leads. Bad input is refused by Preflight
// before anything is written, the lock included. It reports whether op ran.
func (s *Subject) Execute(ctx context.Context, op string) (bool, error) {
	if os.Geteuid() != 0 {
		return false, fmt.Errorf("%s %s must run as root on the node (try sudo)", op, s.Name)
	}
	r := &Runner{Journal: s.Journal, Log: s.Log, Out: s.Out}
	st, err := s.Journal.State()
	if err != nil {
		return false, err
	}
	want := op == "install"
	interrupted := st.Op != "" && st.Finished == ""
	if !interrupted && st.Installed == want {
		s.nothingToDo(op)
		return false, nil
	}
	if Busy(s.LockPath) {
		return false, fmt.Errorf("%w; wait for it to finish", ErrBusy)
	}
	if !interrupted {
		if err := s.Preflight(ctx, op); err != nil {
			return false, err
		}
	}
	release, err := Lock(s.LockPath)
	if err != nil {
		return false, err
	}
	defer release()
	if interrupted {
		if err := s.Load(); err != nil {
			return false, err
		}
		how, err := r.Recover(ctx, s.Plan(st.Op))
		if err != nil {
			return false, err
		}
		fmt.Fprintf(s.Out, "the interrupted %s was %s\n", st.Op, how)
		if st, err = s.Journal.State(); err != nil {
			return false, err
		}
		if st.Installed == want {
			return false, nil
		}
		if err := s.Preflight(ctx, op); err != nil {
			return false, err
		}
	}
	if s.Prepare != nil {
		if err := s.Prepare(ctx, op); err != nil {
			return false, err
		}
	}
	if err := r.Run(ctx, s.Plan(op)); err != nil {
		return false, err
	}
	return true, nil
}

func (s *Subject) nothingToDo(op string) {
	if op == "install" {
		fmt.Fprintf(s.Out, "the %s is already installed; nothing to do\n", s.Name)
		return
	}
	fmt.Fprintf(s.Out, "the %s is not installed; nothing to undo\n", s.Name)
}

// DryRun prints op's preflight verdict and plan; it changes nothing.
func (s *Subject) DryRun(ctx context.Context, op string) {
	if err := s.Preflight(ctx, op); err != nil {
		fmt.Fprintf(s.Out, "preflight: %v\n", err)
	} else {
		fmt.Fprintln(s.Out, "preflight: ok")
	}
	(&Runner{Log: s.Log}).DryRun(s.Out, s.Plan(op))
}
