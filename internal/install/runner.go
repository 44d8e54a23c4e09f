package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// Step is one journaled step of a plan.
type Step struct {
	// Name identifies the step in the journal and in messages.
	Name string
	// Impact says what a person will notice while the step runs (printed
	// by --dry-run), e.g. "the API server is unavailable".
	Impact string
	// Commit marks the point of no return: once it has begun, an interrupted
	// run is finished by the next one rather than rolled back, because the
	// new state may already be serving; once it has ended, a failing later
	// step is not rolled back either: the command says to rerun it.
	Commit bool
	// Do makes the change. It must be idempotent: a recovering run may
	// call it again after a crash inside it.
	Do func(ctx context.Context) error
	// Undo puts back what Do changed, from state on disk only; nil if Do
	// changes nothing that needs putting back. It must be idempotent and
	// must cope with a Do that stopped halfway.
	Undo func(ctx context.Context) error
}

// Plan is an operation: install or undo, as ordered steps.
type Plan struct {
	Op    string
	Steps []Step
}

// Runner runs plans against a journal.
type Runner struct {
	Journal *Journal
	Log     *slog.Logger
	// Out receives one human-readable line per step (may be nil).
	Out io.Writer
	// Faults injects failures for tests; nil in production.
	Faults Faults
}

func (r *Runner) say(format string, args ...any) {
	if r.Out != nil {
		fmt.Fprintf(r.Out, format+"\n", args...)
	}
}

func (r *Runner) record(op, event, step, detail string) error {
	if err := r.Journal.Append(Record{Op: op, Event: event, Step: step, Detail: detail}); err != nil {
		return err
	}
	if r.Faults != nil {
		r.Faults.AfterRecord(op, step, event)
	}
	return nil
}

// DryRun prints the plan with each step's impact and changes nothing.
func (r *Runner) DryRun(w io.Writer, p *Plan) {
	fmt.Fprintf(w, "%s plan (nothing was changed):\n", p.Op)
	for i, s := range p.Steps {
		fmt.Fprintf(w, "  %d. %-18s %s\n", i+1, s.Name, s.Impact)
	}
}

// Run runs p from the start. On a failing step it undoes every step that
// began, newest first, and returns an error naming the step and the cause.
func (r *Runner) Run(ctx context.Context, p *Plan) error {
	if err := r.record(p.Op, EventStart, "", ""); err != nil {
		return err
	}
	return r.forward(ctx, p, 0, nil)
}

// forward runs p's steps from index from; begun lists steps that began in
// an earlier (interrupted) run, for rollback.
func (r *Runner) forward(ctx context.Context, p *Plan, from int, begun []int) error {
	committed := false
	for i := from; i < len(p.Steps); i++ {
		s := p.Steps[i]
		if err := r.record(p.Op, EventBegin, s.Name, ""); err != nil {
			return err
		}
		begun = append(begun, i)
		start := time.Now()
		r.say("[%s %d/%d] %s ...", p.Op, i+1, len(p.Steps), s.Name)
		err := s.Do(ctx)
		if err == nil && r.Faults != nil {
			err = r.Faults.AfterDo(p.Op, s.Name)
		}
		if err != nil {
			if jErr := r.record(p.Op, EventFail, s.Name, err.Error()); jErr != nil {
				r.Log.Error("journal the failure", "op", p.Op, "step", s.Name, "err", jErr)
			}
			r.say("[%s %d/%d] %s FAILED: %v", p.Op, i+1, len(p.Steps), s.Name, err)
			if committed {
				// The new state already serves: finish forward, never back.
				return fmt.Errorf("%s: step %q failed: %w; the %s is committed and serving; rerun the command to finish it", p.Op, s.Name, err, p.Op)
			}
			if rbErr := r.rollback(context.WithoutCancel(ctx), p, begun); rbErr != nil {
				return fmt.Errorf("%s: step %q failed: %w; rollback ALSO failed: %v (rerun the command to finish the rollback)", p.Op, s.Name, err, rbErr)
			}
			return fmt.Errorf("%s: step %q failed: %w; every step was put back", p.Op, s.Name, err)
		}
		if err := r.record(p.Op, EventEnd, s.Name, time.Since(start).Round(time.Millisecond).String()); err != nil {
			return err
		}
		committed = committed || s.Commit
		r.say("[%s %d/%d] %s done in %v", p.Op, i+1, len(p.Steps), s.Name, time.Since(start).Round(time.Millisecond))
	}
	return r.record(p.Op, EventDone, "", "")
}

// rollback undoes the begun steps, newest first.
func (r *Runner) rollback(ctx context.Context, p *Plan, begun []int) error {
	var errs []string
	for k := len(begun) - 1; k >= 0; k-- {
		s := p.Steps[begun[k]]
		if s.Undo == nil {
			continue
		}
		if err := r.record(p.Op, EventUndoBegin, s.Name, ""); err != nil {
			return err
		}
		r.say("[%s] putting back %s ...", p.Op, s.Name)
		if err := s.Undo(ctx); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", s.Name, err))
			r.Log.Error("undo step failed", "op", p.Op, "step", s.Name, "err", err)
			continue
		}
		if err := r.record(p.Op, EventUndoEnd, s.Name, ""); err != nil {
			return err
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return r.record(p.Op, EventRolledBack, "", "")
}

// ErrNothingToRecover means the last run finished (or there was none).
var ErrNothingToRecover = errors.New("nothing to recover")

// Recover finishes an interrupted run of p (whose Op must match the
// journal's last run): forward when its commit step had begun, otherwise by
// putting back every step that began. It returns ErrNothingToRecover when
// the last run finished.
func (r *Runner) Recover(ctx context.Context, p *Plan) (recovered string, err error) {
	st, err := r.Journal.State()
	if err != nil {
		return "", err
	}
	if st.Op == "" || st.Finished != "" {
		return "", ErrNothingToRecover
	}
	if st.Op != p.Op {
		return "", fmt.Errorf("the interrupted run is %q, not %q", st.Op, p.Op)
	}
	index := map[string]int{}
	for i, s := range p.Steps {
		index[s.Name] = i
	}
	var begun []int
	commit := -1
	for _, name := range st.Begun {
		i, ok := index[name]
		if !ok {
			return "", fmt.Errorf("journal %s names step %q that this version does not know; finish with the version that started it", r.Journal.Path(), name)
		}
		if st.Undone[name] {
			continue
		}
		begun = append(begun, i)
		if p.Steps[i].Commit && commit < 0 {
			commit = i
		}
	}
	r.Log.Info("recovering an interrupted run", "op", p.Op, "journal", r.Journal.Path(), "begun", st.Begun)
	if commit >= 0 {
		r.say("[%s] an interrupted run had begun %q: finishing it", p.Op, p.Steps[commit].Name)
		// Re-run from the commit step (its Do is idempotent); the steps before it ended.
		return "finished", r.forward(ctx, p, commit, begun[:indexOf(begun, commit)])
	}
	r.say("[%s] an interrupted run is put back first", p.Op)
	if err := r.rollback(ctx, p, begun); err != nil {
		return "", fmt.Errorf("put back the interrupted %s: %w", p.Op, err)
	}
	return "rolled back", nil
}

func indexOf(xs []int, v int) int {
	for i, x := range xs {
		if x == v {
			return i
		}
	}
	return len(xs)
}
