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
	// Plan returns the plan of op (one of the Op* constants).
	Plan func(op string) *Plan
	// Preflight checks that a fresh run of op can start, writing nothing.
	Preflight func(ctx context.Context, op string) error
	// Load restores from disk what the steps of a run that began earlier
	// need (recovery runs them in a fresh process).
	Load func() error
	// Prepare runs after the lock is taken, right before a fresh run of op;
	// it may write (for example the facts the steps will need). Optional.
	Prepare func(ctx context.Context, op string) error
	// Stands checks, writing nothing, that the state the journal records
	// still holds on the host (nothing moved the subject behind QuantyKube's
	// back). Execute calls it before it trusts a finished journal; an error
	// is a refusal that names what happened and what to do. Optional.
	Stands func(ctx context.Context) error
	// Faults injects failures for tests (see Faults); nil in production.
	Faults Faults
}

// Execute runs op (one of the Op* constants) the same way for every subject: it
// refuses a second concurrent run; it finishes or puts back a run that was
// interrupted (kill -9, reboot) before anything else; and it runs op unless
// the subject already is where op leads. Bad input is refused by Preflight
// before anything is written, the lock included. It reports whether op ran.
func (s *Subject) Execute(ctx context.Context, op string) (bool, error) {
	if os.Geteuid() != 0 {
		return false, fmt.Errorf("%s %s must run as root on the node (try sudo)", op, s.Name)
	}
	r := &Runner{Journal: s.Journal, Log: s.Log, Out: s.Out, Faults: s.Faults}
	st, err := s.Journal.State()
	if err != nil {
		return false, err
	}
	interrupted := st.Op != "" && st.Finished == ""
	if !interrupted {
		done, err := s.settled(ctx, st, op)
		if err != nil || done {
			if done {
				s.nothingToDo(op)
			}
			return false, err
		}
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
		if done, err := s.settled(ctx, st, op); err != nil || done {
			return false, err
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

// settled reports whether the subject already is where op leads, by its
// journal st and, when the journal says installed, by Stands: an install or
// undo refuses to trust a journal whose state no longer holds on the host
// (Stands' error); reattach is settled once that state holds again.
func (s *Subject) settled(ctx context.Context, st State, op string) (bool, error) {
	if !st.Installed {
		return !InstalledAfter(op), nil
	}
	var stands error
	if s.Stands != nil {
		stands = s.Stands(ctx)
	}
	switch op {
	case OpInstall:
		return stands == nil, stands
	case OpUndo:
		return false, stands
	case OpReattach:
		return stands == nil, nil
	}
	return false, nil // OpRelease: its preflight wants the state not to stand
}

func (s *Subject) nothingToDo(op string) {
	if op == OpReattach {
		fmt.Fprintf(s.Out, "the %s runs where the journal says; nothing to reattach\n", s.Name)
		return
	}
	if op == OpInstall {
		fmt.Fprintf(s.Out, "the %s is already installed; nothing to do\n", s.Name)
		return
	}
	fmt.Fprintf(s.Out, "the %s is not installed; nothing to undo\n", s.Name)
}

// DryRun prints op's preflight verdict and plan; it changes nothing. It
// decides as Execute does: nothing to do when the subject already is where
// op leads; an interrupted run is finished or put back by the real run
// before any preflight, so it is named and the preflight left out. A
// failed preflight is returned after the plan is printed: a dry run of a
// command that would be refused fails too.
func (s *Subject) DryRun(ctx context.Context, op string) error {
	st, err := s.Journal.State()
	if err != nil {
		return err
	}
	if interrupted := st.Op != "" && st.Finished == ""; interrupted {
		fmt.Fprintf(s.Out, "preflight: not checked: the journal holds an interrupted %s, which the command finishes or puts back first\n", st.Op)
		(&Runner{Log: s.Log}).DryRun(s.Out, s.Plan(st.Op))
		return nil
	}
	done, err := s.settled(ctx, st, op)
	if err != nil {
		return err
	}
	if done {
		s.nothingToDo(op)
		return nil
	}
	err = s.Preflight(ctx, op)
	if err == nil {
		fmt.Fprintln(s.Out, "preflight: ok")
	}
	(&Runner{Log: s.Log}).DryRun(s.Out, s.Plan(op))
	if err != nil {
		return fmt.Errorf("preflight failed: %w", err)
	}
	return nil
}
