package hostrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quantyroot/quantykube/internal/install"
)

// fakeHost is a host root in a temp dir and a systemd that records units.
type fakeHost struct {
	root    string
	started []string
	active  atomic.Bool
	// onStart plays the installer: it writes the journal when the unit starts.
	onStart func(j *install.Journal)
	// diverged, when set, is what install store --verify answers (exit 1).
	diverged string
}

func (h *fakeHost) command(_ context.Context, name string, args ...string) ([]byte, error) {
	switch name {
	case "systemctl":
		if h.active.Load() {
			return []byte("active\n"), nil
		}
		return []byte("inactive\n"), nil
	case "systemd-run":
		h.started = append(h.started, strings.Join(args, " "))
		if h.onStart != nil {
			j, _ := install.OpenJournal(filepath.Join(h.root, "var/lib/quantykube/install/store/journal.jsonl"))
			h.onStart(j)
		}
		return nil, nil
	}
	if strings.HasPrefix(name, BinaryDir) {
		// This binary on the host: install store --verify finds the state standing.
		if h.diverged != "" {
			return []byte(h.diverged + "\n"), errors.New("exit status 1")
		}
		return []byte("the store's recorded state stands\n"), nil
	}
	return nil, os.ErrNotExist
}

func newRunner(t *testing.T, h *fakeHost, op string) *Runner {
	self := filepath.Join(t.TempDir(), "self")
	if err := os.WriteFile(self, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &Runner{Target: Target{Subject: "store", Op: op}, Root: h.root, Self: self, Poll: time.Millisecond, HostCommand: h.command}
}

func record(j *install.Journal, op string, events ...string) {
	_ = j.Append(install.Record{Op: op, Event: install.EventStart})
	for _, e := range events {
		r := install.Record{Op: op, Event: e, Step: "copy"}
		if e == install.EventFail {
			r.Detail = "boom"
		}
		_ = j.Append(r)
	}
}

func TestRunStartsUnitAndReportsDone(t *testing.T) {
	h := &fakeHost{root: t.TempDir()}
	h.onStart = func(j *install.Journal) {
		record(j, "install", install.EventBegin, install.EventEnd, install.EventDone)
	}
	res, err := newRunner(t, h, "install").Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.State != StateDone || len(h.started) != 1 {
		t.Fatalf("result %+v, units %v; want done after one unit", res, h.started)
	}
	if !strings.Contains(h.started[0], "--unit=quantykube-install-store") || !strings.Contains(h.started[0], "/var/lib/quantykube/bin/quantykube-") {
		t.Errorf("systemd-run args %q", h.started[0])
	}
	bins, _ := filepath.Glob(filepath.Join(h.root, BinaryDir, "quantykube-*"))
	if len(bins) != 1 {
		t.Errorf("binaries on the host: %v; want one", bins)
	}
}

func TestRunDoesNotRerunFinishedWork(t *testing.T) {
	h := &fakeHost{root: t.TempDir()}
	j, _ := install.OpenJournal(filepath.Join(h.root, "var/lib/quantykube/install/store/journal.jsonl"))
	record(j, "install", install.EventDone)
	res, err := newRunner(t, h, "install").Run(context.Background())
	if err != nil || res.State != StateDone || len(h.started) != 0 {
		t.Fatalf("result %+v err %v units %v; want done without starting anything", res, err, h.started)
	}
}

func TestRunReportsRollbackOfThisStep(t *testing.T) {
	h := &fakeHost{root: t.TempDir()}
	j, _ := install.OpenJournal(filepath.Join(h.root, "var/lib/quantykube/install/store/journal.jsonl"))
	record(j, "install", install.EventFail, install.EventRolledBack)
	r := newRunner(t, h, "install")
	r.Since = time.Now().Add(-time.Minute)
	res, err := r.Run(context.Background())
	if err != nil || res.State != StateRolledBack || !strings.Contains(res.Detail, "boom") || len(h.started) != 0 {
		t.Fatalf("result %+v err %v units %v; want the earlier rollback reported, nothing started", res, err, h.started)
	}
	// A rollback from before the step began belongs to an earlier attempt: start again.
	h.onStart = func(j *install.Journal) { record(j, "install", install.EventDone) }
	r.Since = time.Now().Add(time.Minute)
	res, err = r.Run(context.Background())
	if err != nil || res.State != StateDone || len(h.started) != 1 {
		t.Fatalf("result %+v err %v units %v; want a new run", res, err, h.started)
	}
}

func TestRunFollowsActiveUnit(t *testing.T) {
	h := &fakeHost{root: t.TempDir()}
	h.active.Store(true)
	j, _ := install.OpenJournal(filepath.Join(h.root, "var/lib/quantykube/install/store/journal.jsonl"))
	record(j, "install", install.EventBegin)
	go func() {
		time.Sleep(20 * time.Millisecond)
		record(j, "install", install.EventDone)
		h.active.Store(false)
	}()
	res, err := newRunner(t, h, "install").Run(context.Background())
	if err != nil || res.State != StateDone || len(h.started) != 0 {
		t.Fatalf("result %+v err %v units %v; want the active run followed, not restarted", res, err, h.started)
	}
}

func TestCheckOnlyStartsNothing(t *testing.T) {
	h := &fakeHost{root: t.TempDir()}
	r := newRunner(t, h, "install")
	r.CheckOnly = true
	res, err := r.Run(context.Background())
	if err != nil || res.State != StateNone || len(h.started) != 0 {
		t.Fatalf("result %+v err %v units %v", res, err, h.started)
	}
}

func TestUndoOfNothingIsDone(t *testing.T) {
	h := &fakeHost{root: t.TempDir()}
	res, err := newRunner(t, h, "undo").Run(context.Background())
	if err != nil || res.State != StateDone || len(h.started) != 0 {
		t.Fatalf("result %+v err %v units %v; an undo of a never-installed subject is done", res, err, h.started)
	}
}

func TestTargetValidate(t *testing.T) {
	if err := (Target{Subject: "etcd", Op: "install"}).Validate(); err == nil {
		t.Error("unknown subject accepted")
	}
	if err := (Target{Subject: "store", Op: "move"}).Validate(); err == nil {
		t.Error("unknown op accepted")
	}
}

// An undo that arrives while the install's timer still waits stops that
// timer (the install never starts), and waits for an install already running.
func TestRunSettlesTheOppositeRun(t *testing.T) {
	h := &fakeHost{root: t.TempDir()}
	var calls []string
	installRunning := 3 // passes of `is-active` that still see the install service running
	cmd := func(ctx context.Context, name string, args ...string) ([]byte, error) {
		calls = append(calls, name+" "+strings.Join(args, " "))
		if name == "systemctl" && args[0] == "is-active" && args[1] == "quantykube-install-store.service" {
			if installRunning > 0 {
				installRunning--
				return []byte("active\n"), nil
			}
		}
		return h.command(ctx, name, args...)
	}
	// The install finishes while the undo waits: its journal says installed.
	if err := os.MkdirAll(filepath.Join(h.root, "var/lib/quantykube/install/store"), 0o700); err != nil {
		t.Fatal(err)
	}
	j, err := install.OpenJournal(filepath.Join(h.root, "var/lib/quantykube/install/store/journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	record(j, "install", install.EventBegin, install.EventEnd, install.EventDone)
	h.onStart = func(j *install.Journal) { record(j, "undo", install.EventBegin, install.EventEnd, install.EventDone) }
	r := newRunner(t, h, "undo")
	r.HostCommand = cmd
	res, err := r.Run(context.Background())
	if err != nil || res.State != StateDone {
		t.Fatalf("result %+v, err %v; want done", res, err)
	}
	if calls[0] != "systemctl stop quantykube-install-store.timer" {
		t.Errorf("first host command %q; want the install's timer stopped", calls[0])
	}
	if installRunning != 0 {
		t.Errorf("the undo did not wait for the running install")
	}
	if len(h.started) != 1 || !strings.Contains(h.started[0], "--unit=quantykube-undo-store") {
		t.Errorf("units started %v; want the undo once, after the install ended", h.started)
	}
}

func TestRunRefusesAJournalWhoseStateNoLongerStands(t *testing.T) {
	h := &fakeHost{root: t.TempDir(), diverged: "quantykube: the API server was pointed back at https://127.0.0.1:2379 behind QuantyKube's back: ..."}
	j, _ := install.OpenJournal(filepath.Join(h.root, "var/lib/quantykube/install/store/journal.jsonl"))
	record(j, "install", install.EventDone)
	res, err := newRunner(t, h, "install").Run(context.Background())
	if err != nil || res.State != StateRefused || !strings.Contains(res.Detail, "pointed back") || len(h.started) != 0 {
		t.Fatalf("result %+v err %v units %v; want refused with the host's line, nothing started", res, err, h.started)
	}
}

func TestRunReportsARefusalBeforeAnyRun(t *testing.T) {
	h := &fakeHost{root: t.TempDir()}
	r := newRunner(t, h, "install")
	h.onStart = func(*install.Journal) {
		// The installer refused in its preflight: no journal record, one line of output.
		out := filepath.Join(h.root, r.Output())
		_ = os.MkdirAll(filepath.Dir(out), 0o700)
		_ = os.WriteFile(out, []byte("quantykube: port 2479 on 127.0.0.1 is taken; stop what listens there first\n"), 0o600)
	}
	r.Since = time.Now()
	res, err := r.Run(context.Background())
	if err != nil || res.State != StateRefused || !strings.Contains(res.Detail, "port 2479") {
		t.Fatalf("result %+v err %v; want refused with the installer's line", res, err)
	}
}

func TestPreflightOnly(t *testing.T) {
	h := &fakeHost{root: t.TempDir()}
	r := newRunner(t, h, "install")
	r.PreflightOnly = true
	res, err := r.Run(context.Background())
	if err != nil || res.State != StateDone || len(h.started) != 0 {
		t.Fatalf("result %+v err %v units %v; want done, nothing started", res, err, h.started)
	}
	h.diverged = "quantykube: the runtime's root dir /var/lib/quantykube/runtime is on overlayfs"
	if res, _ = r.Run(context.Background()); res.State != StateRefused || !strings.Contains(res.Detail, "overlayfs") {
		t.Fatalf("result %+v; want refused with the host's line", res)
	}
}
