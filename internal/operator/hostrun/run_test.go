package hostrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/internal/install"
)

// fakeHost is a host root in a temp dir and a systemd that records units.
// It runs in the test's goroutine: a unit "runs" for as many is-active
// questions as active[unit] says, then ends (and ended[unit] plays its last
// journal records), so no test sleeps for a unit to finish.
type fakeHost struct {
	t       *testing.T
	root    string
	calls   []string // every host command, with its arguments
	started []string
	active  map[string]int    // unit → is-active answers "active" left
	ended   map[string]func() // unit → what happens when it ends
	// onStart plays the installer: it writes the journal when the unit starts.
	onStart func(j *install.Journal)
	// diverged, when set, is what install store --verify answers (exit 1).
	diverged string
}

func newFakeHost(t *testing.T) *fakeHost {
	return &fakeHost{t: t, root: t.TempDir(), active: map[string]int{}, ended: map[string]func(){}}
}

// journal is the store's journal on the fake host.
func (h *fakeHost) journal() *install.Journal {
	j, err := install.OpenJournal(filepath.Join(h.root, "var/lib/quantykube/install/store/journal.jsonl"))
	if err != nil {
		h.t.Fatal(err)
	}
	return j
}

func (h *fakeHost) command(_ context.Context, name string, args ...string) ([]byte, error) {
	h.calls = append(h.calls, name+" "+strings.Join(args, " "))
	switch name {
	case "systemctl":
		if args[0] == "is-active" {
			return h.isActive(args[1:]), nil
		}
		return nil, nil
	case "systemd-run":
		h.started = append(h.started, strings.Join(args, " "))
		if h.onStart != nil {
			h.onStart(h.journal())
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

// isActive answers systemctl is-active, one line per unit.
func (h *fakeHost) isActive(units []string) []byte {
	var out strings.Builder
	for _, u := range units {
		state := "inactive"
		if h.active[u] > 0 {
			state = "active"
			if h.active[u]--; h.active[u] == 0 && h.ended[u] != nil {
				h.ended[u]()
			}
		}
		out.WriteString(state + "\n")
	}
	return []byte(out.String())
}

func newRunner(t *testing.T, h *fakeHost, op v1.Operation) *Runner {
	self := filepath.Join(t.TempDir(), "self")
	if err := os.WriteFile(self, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &Runner{Target: Target{Subject: v1.SubjectStore, Op: op}, Root: h.root, Self: self, Poll: time.Millisecond, HostCommand: h.command,
		Etcdutl: filepath.Join(t.TempDir(), "no-etcdutl")}
}

func record(t *testing.T, j *install.Journal, op v1.Operation, events ...string) {
	t.Helper()
	recs := []install.Record{{Op: string(op), Event: install.EventStart}}
	for _, e := range events {
		r := install.Record{Op: string(op), Event: e, Step: "copy"}
		if e == install.EventFail {
			r.Detail = "boom"
		}
		recs = append(recs, r)
	}
	for _, r := range recs {
		if err := j.Append(r); err != nil {
			t.Fatalf("append to the journal: %v", err)
		}
	}
}

func TestRunStartsUnitAndReportsDone(t *testing.T) {
	h := newFakeHost(t)
	h.onStart = func(j *install.Journal) {
		record(t, j, v1.OperationInstall, install.EventBegin, install.EventEnd, install.EventDone)
	}
	res, err := newRunner(t, h, v1.OperationInstall).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.State != StateDone || len(h.started) != 1 {
		t.Fatalf("result %+v, units %v; want done after one unit", res, h.started)
	}
	if !strings.Contains(h.started[0], "--unit=quantykube-install-store") || !strings.Contains(h.started[0], "/var/lib/quantykube/bin/quantykube-") {
		t.Errorf("systemd-run args %q", h.started[0])
	}
	bins, err := filepath.Glob(filepath.Join(h.root, BinaryDir, "quantykube-*"))
	if err != nil || len(bins) != 1 {
		t.Errorf("binaries on the host: %v; want one", bins)
	}
}

func TestRunDoesNotRerunFinishedWork(t *testing.T) {
	h := newFakeHost(t)
	j := h.journal()
	record(t, j, v1.OperationInstall, install.EventDone)
	res, err := newRunner(t, h, v1.OperationInstall).Run(context.Background())
	if err != nil || res.State != StateDone || len(h.started) != 0 {
		t.Fatalf("result %+v err %v units %v; want done without starting anything", res, err, h.started)
	}
}

func TestRunReportsRollbackOfThisStep(t *testing.T) {
	h := newFakeHost(t)
	j := h.journal()
	record(t, j, v1.OperationInstall, install.EventFail, install.EventRolledBack)
	r := newRunner(t, h, v1.OperationInstall)
	r.Since = time.Now().Add(-time.Minute)
	res, err := r.Run(context.Background())
	if err != nil || res.State != StateRolledBack || !strings.Contains(res.Detail, "boom") || len(h.started) != 0 {
		t.Fatalf("result %+v err %v units %v; want the earlier rollback reported, nothing started", res, err, h.started)
	}
	// A rollback from before the step began belongs to an earlier attempt: start again.
	h.onStart = func(j *install.Journal) { record(t, j, v1.OperationInstall, install.EventDone) }
	r.Since = time.Now().Add(time.Minute)
	res, err = r.Run(context.Background())
	if err != nil || res.State != StateDone || len(h.started) != 1 {
		t.Fatalf("result %+v err %v units %v; want a new run", res, err, h.started)
	}
}

func TestRunFollowsActiveUnit(t *testing.T) {
	h := newFakeHost(t)
	j := h.journal()
	record(t, j, v1.OperationInstall, install.EventBegin)
	// The install runs for three more questions, then finishes.
	h.active["quantykube-install-store.service"] = 3
	h.ended["quantykube-install-store.service"] = func() { record(t, j, v1.OperationInstall, install.EventEnd, install.EventDone) }
	res, err := newRunner(t, h, v1.OperationInstall).Run(context.Background())
	if err != nil || res.State != StateDone || len(h.started) != 0 {
		t.Fatalf("result %+v err %v units %v; want the active run followed, not restarted", res, err, h.started)
	}
	if h.active["quantykube-install-store.service"] != 0 {
		t.Errorf("the run was not followed to its end")
	}
}

func TestCheckOnlyStartsNothing(t *testing.T) {
	h := newFakeHost(t)
	r := newRunner(t, h, v1.OperationInstall)
	r.CheckOnly = true
	res, err := r.Run(context.Background())
	if err != nil || res.State != StateNone || len(h.started) != 0 {
		t.Fatalf("result %+v err %v units %v", res, err, h.started)
	}
}

func TestUndoOfNothingIsDone(t *testing.T) {
	h := newFakeHost(t)
	res, err := newRunner(t, h, v1.OperationUndo).Run(context.Background())
	if err != nil || res.State != StateDone || len(h.started) != 0 {
		t.Fatalf("result %+v err %v units %v; an undo of a never-installed subject is done", res, err, h.started)
	}
}

func TestTargetValidate(t *testing.T) {
	if err := (Target{Subject: "etcd", Op: v1.OperationInstall}).Validate(); err == nil {
		t.Error("unknown subject accepted")
	}
	if err := (Target{Subject: v1.SubjectStore, Op: "move"}).Validate(); err == nil {
		t.Error("unknown op accepted")
	}
}

// An undo that arrives while the install's timer still waits stops that
// timer (the install never starts), and waits for an install already running.
func TestRunSettlesTheOppositeRun(t *testing.T) {
	h := newFakeHost(t)
	// The install is still running when the undo arrives; it finishes while
	// the undo waits, and its journal says installed.
	j := h.journal()
	record(t, j, v1.OperationInstall, install.EventBegin)
	h.active["quantykube-install-store.service"] = 3
	h.ended["quantykube-install-store.service"] = func() { record(t, j, v1.OperationInstall, install.EventEnd, install.EventDone) }
	h.onStart = func(j *install.Journal) {
		record(t, j, v1.OperationUndo, install.EventBegin, install.EventEnd, install.EventDone)
	}
	res, err := newRunner(t, h, v1.OperationUndo).Run(context.Background())
	if err != nil || res.State != StateDone {
		t.Fatalf("result %+v, err %v; want done", res, err)
	}
	if h.calls[0] != "systemctl stop quantykube-install-store.timer" {
		t.Errorf("first host command %q; want the install's timer stopped", h.calls[0])
	}
	if h.active["quantykube-install-store.service"] != 0 {
		t.Errorf("the undo did not wait for the running install")
	}
	if len(h.started) != 1 || !strings.Contains(h.started[0], "--unit=quantykube-undo-store") {
		t.Errorf("units started %v; want the undo once, after the install ended", h.started)
	}
}

// A pending timer of the opposite run that cannot be stopped stops this
// run before it starts anything.
func TestRunRefusesWhenTheOppositeTimerStays(t *testing.T) {
	h := newFakeHost(t)
	h.active["quantykube-install-store.timer"] = 100
	r := newRunner(t, h, v1.OperationUndo)
	r.HostCommand = func(ctx context.Context, name string, args ...string) ([]byte, error) {
		if name == "systemctl" && args[0] == "stop" {
			return []byte("Failed to stop: Access denied\n"), errors.New("exit status 1")
		}
		return h.command(ctx, name, args...)
	}
	res, err := r.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "quantykube-install-store.timer") || len(h.started) != 0 {
		t.Fatalf("result %+v err %v units %v; want an error naming the timer, nothing started", res, err, h.started)
	}
}

// A host pod whose context ends while it follows (--detach, or killed)
// reports started: a later attempt follows the journal.
func TestRunCutShortReportsStarted(t *testing.T) {
	h := newFakeHost(t)
	record(t, h.journal(), v1.OperationInstall, install.EventBegin)
	h.active["quantykube-install-store.service"] = 1 << 30
	ctx, cancel := context.WithCancel(context.Background())
	r := newRunner(t, h, v1.OperationInstall)
	r.HostCommand = func(c context.Context, name string, args ...string) ([]byte, error) {
		if len(h.calls) > 5 {
			cancel()
		}
		return h.command(c, name, args...)
	}
	res, err := r.Run(ctx)
	if err != nil || res.State != StateStarted {
		t.Fatalf("result %+v err %v; want started", res, err)
	}
}

func TestRunRefusesAJournalWhoseStateNoLongerStands(t *testing.T) {
	h := &fakeHost{root: t.TempDir(), diverged: "quantykube: the API server was pointed back at https://127.0.0.1:2379 behind QuantyKube's back: ..."}
	j := h.journal()
	record(t, j, v1.OperationInstall, install.EventDone)
	res, err := newRunner(t, h, v1.OperationInstall).Run(context.Background())
	if err != nil || res.State != StateRefused || !strings.Contains(res.Detail, "pointed back") || len(h.started) != 0 {
		t.Fatalf("result %+v err %v units %v; want refused with the host's line, nothing started", res, err, h.started)
	}
}

func TestRunReportsARefusalBeforeAnyRun(t *testing.T) {
	h := newFakeHost(t)
	r := newRunner(t, h, v1.OperationInstall)
	h.onStart = func(*install.Journal) {
		// The installer refused in its preflight: no journal record, one line of output.
		out := filepath.Join(h.root, r.Output())
		if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, []byte("quantykube: port 2479 on 127.0.0.1 is taken; stop what listens there first\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r.Since = time.Now()
	res, err := r.Run(context.Background())
	if err != nil || res.State != StateRefused || !strings.Contains(res.Detail, "port 2479") {
		t.Fatalf("result %+v err %v; want refused with the installer's line", res, err)
	}
}

func TestPreflightOnly(t *testing.T) {
	h := newFakeHost(t)
	r := newRunner(t, h, v1.OperationInstall)
	r.PreflightOnly = true
	res, err := r.Run(context.Background())
	if err != nil || res.State != StateDone || len(h.started) != 0 {
		t.Fatalf("result %+v err %v units %v; want done, nothing started", res, err, h.started)
	}
	h.diverged = "quantykube: the runtime's root dir /var/lib/quantykube/runtime is on overlayfs"
	if res, err = r.Run(context.Background()); err != nil || res.State != StateRefused || !strings.Contains(res.Detail, "overlayfs") {
		t.Fatalf("result %+v err %v; want refused with the host's line", res, err)
	}
}

// An HA node step runs `OP store --ha STEP` in its own unit and reads its
// own journal (hamove's, under store-ha/STEP); done once, it is not rerun.
func TestRunHAStepHasItsOwnUnitAndJournal(t *testing.T) {
	h := newFakeHost(t)
	path := filepath.Join(h.root, "var/lib/quantykube/install/store-ha/join/journal.jsonl")
	h.onStart = func(*install.Journal) {
		j, err := install.OpenJournal(path)
		if err != nil {
			t.Fatal(err)
		}
		record(t, j, v1.OperationInstall, install.EventBegin, install.EventEnd, install.EventDone)
	}
	r := newRunner(t, h, v1.OperationInstall)
	r.HA = "join"
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.State != StateDone || len(h.started) != 1 {
		t.Fatalf("result %+v, units %v; want done after one unit", res, h.started)
	}
	if args := h.started[0]; !strings.Contains(args, "--unit=quantykube-install-store-ha-join ") || !strings.HasSuffix(args, " install store --ha=join") {
		t.Errorf("systemd-run args %q; want the HA step's own unit running install store --ha=join", args)
	}
	if res, err = r.Run(context.Background()); err != nil || res.State != StateDone || len(h.started) != 1 {
		t.Errorf("rerun: %+v, %v, units %v; want done from the journal, nothing started", res, err, h.started)
	}
	// A later step (a new --since) does not trust the old done: the host
	// command runs and says whether it stands.
	r.Since = time.Now().Add(time.Second)
	out := filepath.Join(h.root, r.Output())
	h.onStart = func(*install.Journal) {
		if err := os.WriteFile(out, []byte("a refusal: the store is not where join belongs\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if res, err = r.Run(context.Background()); err != nil || res.State != StateRefused || len(h.started) != 2 {
		t.Errorf("a done of an earlier move: %+v, %v, units %v; want the host command run, and its refusal", res, err, h.started)
	}
	h.onStart = func(*install.Journal) {
		if err := os.WriteFile(out, []byte("join is done on cp2; nothing to do\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if res, err = r.Run(context.Background()); err != nil || res.State != StateDone || len(h.started) != 3 {
		t.Errorf("done in this move: %+v, %v, units %v; want the host command's done", res, err, h.started)
	}
	if err := (Target{Subject: v1.SubjectStore, Op: v1.OperationInstall, HA: "leave"}).Validate(); err == nil {
		t.Error("install store --ha leave validated; want refused (leave is an undo step)")
	}
}

// The HA undo's steps get the image's etcdutl on the host (a kubeadm node
// has etcd only inside its static pod), content-keyed beside this binary;
// install steps do not, and an image without one leaves the host default.
func TestHAUndoStepsGetTheImagesEtcdutl(t *testing.T) {
	h := newFakeHost(t)
	path := filepath.Join(h.root, "var/lib/quantykube/install/store-ha/restore-etcd/journal.jsonl")
	h.onStart = func(*install.Journal) {
		j, err := install.OpenJournal(path)
		if err != nil {
			t.Fatal(err)
		}
		record(t, j, v1.OperationUndo, install.EventBegin, install.EventEnd, install.EventDone)
	}
	r := newRunner(t, h, v1.OperationUndo)
	r.HA = "restore-etcd"
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(h.started) != 1 || strings.Contains(h.started[0], "--etcdutl") {
		t.Fatalf("units %v; want one, without --etcdutl (the image has none)", h.started)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	r.Etcdutl = filepath.Join(t.TempDir(), "etcdutl")
	if err := os.WriteFile(r.Etcdutl, []byte("etcd's etcdutl"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	args := h.started[len(h.started)-1]
	i := strings.Index(args, "--etcdutl="+BinaryDir+"/etcdutl-")
	if i < 0 || !strings.Contains(args, " undo store --ha=restore-etcd ") {
		t.Fatalf("systemd-run args %q; want undo store --ha=restore-etcd --etcdutl=%s/etcdutl-<hash>", args, BinaryDir)
	}
	hostBin := strings.Fields(args[i+len("--etcdutl="):])[0]
	if b, err := os.ReadFile(filepath.Join(h.root, hostBin)); err != nil || string(b) != "etcd's etcdutl" {
		t.Errorf("the host's %s: %q, %v; want the image's etcdutl", hostBin, b, err)
	}
}
