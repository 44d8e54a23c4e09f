package install

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dryRunSubject is a subject whose preflight returns preflightErr and counts
// its calls, with its journal and lock in a fresh directory.
func dryRunSubject(t *testing.T, preflightErr error, calls *int) (*Subject, *bytes.Buffer, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	j, err := OpenJournal(filepath.Join(dir, "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	var trace []string
	return &Subject{
		Name: "thing", Journal: j, LockPath: filepath.Join(dir, "lock"), Log: slog.Default(), Out: &out,
		Plan: func(op string) *Plan { p := testPlan(&trace, ""); p.Op = op; return p },
		Preflight: func(context.Context, string) error {
			*calls++
			return preflightErr
		},
	}, &out, dir
}

// TestDryRunFailsWhenThePreflightFails: a dry run of a command the
// preflight would refuse prints the plan, returns the preflight's error (the
// command exits non-zero) and writes nothing, not even the state directory.
func TestDryRunFailsWhenThePreflightFails(t *testing.T) {
	var calls int
	s, out, dir := dryRunSubject(t, errors.New("this is not a node; pass --manifests"), &calls)
	err := s.DryRun(context.Background(), OpInstall)
	if err == nil || !strings.Contains(err.Error(), "this is not a node; pass --manifests") {
		t.Fatalf("DryRun = %v, want the preflight's error", err)
	}
	if calls != 1 {
		t.Fatalf("preflight ran %d times, want 1", calls)
	}
	if !strings.Contains(out.String(), "install plan (nothing was changed)") || strings.Contains(out.String(), "preflight: ok") {
		t.Fatalf("want the plan and no ok verdict, got:\n%s", out)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dry run created %s (stat: %v)", dir, err)
	}
}

func TestDryRunPassesWhenThePreflightPasses(t *testing.T) {
	var calls int
	s, out, _ := dryRunSubject(t, nil, &calls)
	if err := s.DryRun(context.Background(), OpInstall); err != nil {
		t.Fatalf("DryRun = %v", err)
	}
	if !strings.HasPrefix(out.String(), "preflight: ok\ninstall plan") {
		t.Fatalf("want the verdict then the plan, got:\n%s", out)
	}
}

// TestDryRunDecidesAsExecute: where Execute would do nothing (an undo of a
// subject never installed) or recover first (an interrupted run), the dry
// run says so and runs no preflight, so it does not fail where the command
// would not.
func TestDryRunDecidesAsExecute(t *testing.T) {
	var calls int
	s, out, _ := dryRunSubject(t, errors.New("refused"), &calls)
	if err := s.DryRun(context.Background(), OpUndo); err != nil || !strings.Contains(out.String(), "nothing to undo") {
		t.Fatalf("undo of a subject never installed: DryRun = %v, output:\n%s", err, out)
	}
	s.Journal.Append(Record{Op: OpInstall, Event: EventStart})
	s.Journal.Append(Record{Op: OpInstall, Event: EventBegin, Step: "a"})
	out.Reset()
	if err := s.DryRun(context.Background(), OpInstall); err != nil || !strings.Contains(out.String(), "interrupted install") {
		t.Fatalf("interrupted install: DryRun = %v, output:\n%s", err, out)
	}
	if calls != 0 {
		t.Fatalf("preflight ran %d times, want 0", calls)
	}
}
