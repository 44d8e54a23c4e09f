package install

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func testPlan(trace *[]string, failAt string) *Plan {
	mk := func(name string, commit bool) Step {
		return Step{
			Name: name, Commit: commit,
			Do: func(context.Context) error {
				*trace = append(*trace, "do "+name)
				if name == failAt {
					return errors.New("boom")
				}
				return nil
			},
			Undo: func(context.Context) error { *trace = append(*trace, "undo "+name); return nil },
		}
	}
	return &Plan{Op: "install", Steps: []Step{mk("a", false), mk("b", false), mk("c", true), mk("d", false)}}
}

func newRunner(t *testing.T) *Runner {
	j, err := OpenJournal(filepath.Join(t.TempDir(), "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return &Runner{Journal: j, Log: slog.Default()}
}

func TestRunRollsBackInReverse(t *testing.T) {
	r := newRunner(t)
	var trace []string
	err := r.Run(context.Background(), testPlan(&trace, "c"))
	if err == nil || !strings.Contains(err.Error(), `step "c" failed`) {
		t.Fatalf("err = %v", err)
	}
	want := []string{"do a", "do b", "do c", "undo c", "undo b", "undo a"}
	if !reflect.DeepEqual(trace, want) {
		t.Fatalf("trace %v, want %v", trace, want)
	}
	st, _ := r.Journal.State()
	if st.Finished != EventRolledBack || st.Installed {
		t.Fatalf("state %+v", st)
	}
}

func TestRecoverBeforeCommitRollsBack(t *testing.T) {
	r := newRunner(t)
	j := r.Journal
	j.Append(Record{Op: "install", Event: EventStart})
	j.Append(Record{Op: "install", Event: EventBegin, Step: "a"})
	j.Append(Record{Op: "install", Event: EventEnd, Step: "a"})
	j.Append(Record{Op: "install", Event: EventBegin, Step: "b"}) // killed inside b
	var trace []string
	how, err := r.Recover(context.Background(), testPlan(&trace, ""))
	if err != nil || how != "rolled back" {
		t.Fatalf("recover: %q %v", how, err)
	}
	if want := []string{"undo b", "undo a"}; !reflect.DeepEqual(trace, want) {
		t.Fatalf("trace %v, want %v", trace, want)
	}
	if _, err := r.Recover(context.Background(), testPlan(&trace, "")); !errors.Is(err, ErrNothingToRecover) {
		t.Fatalf("second recover: %v", err)
	}
}

func TestRecoverAfterCommitFinishes(t *testing.T) {
	r := newRunner(t)
	j := r.Journal
	j.Append(Record{Op: "install", Event: EventStart})
	for _, s := range []string{"a", "b"} {
		j.Append(Record{Op: "install", Event: EventBegin, Step: s})
		j.Append(Record{Op: "install", Event: EventEnd, Step: s})
	}
	j.Append(Record{Op: "install", Event: EventBegin, Step: "c"}) // killed inside the commit step
	var trace []string
	how, err := r.Recover(context.Background(), testPlan(&trace, ""))
	if err != nil || how != "finished" {
		t.Fatalf("recover: %q %v", how, err)
	}
	if want := []string{"do c", "do d"}; !reflect.DeepEqual(trace, want) {
		t.Fatalf("trace %v, want %v", trace, want)
	}
	st, _ := j.State()
	if !st.Installed {
		t.Fatalf("state %+v", st)
	}
}

func TestFailureAfterCommitIsNotRolledBack(t *testing.T) {
	r := newRunner(t)
	var trace []string
	err := r.Run(context.Background(), testPlan(&trace, "d"))
	if err == nil || !strings.Contains(err.Error(), "rerun the command to finish") {
		t.Fatalf("err = %v", err)
	}
	if want := []string{"do a", "do b", "do c", "do d"}; !reflect.DeepEqual(trace, want) {
		t.Fatalf("trace %v, want %v", trace, want)
	}
	trace = nil
	how, err := r.Recover(context.Background(), testPlan(&trace, ""))
	if err != nil || how != "finished" {
		t.Fatalf("recover: %q %v", how, err)
	}
	if want := []string{"do c", "do d"}; !reflect.DeepEqual(trace, want) {
		t.Fatalf("trace %v, want %v", trace, want)
	}
}
