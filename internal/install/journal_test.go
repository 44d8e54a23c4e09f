package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestJournalTornTailIgnoredAndCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j, _ := OpenJournal(path)
	if err := j.Append(Record{Op: OpInstall, Event: EventStart}); err != nil {
		t.Fatal(err)
	}
	// A crash in the middle of the next Append leaves half a line.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"op":"install","event":"beg`)
	f.Close()
	recs, err := j.Records()
	if err != nil || len(recs) != 1 {
		t.Fatalf("records with a torn tail: %v, %v", recs, err)
	}
	if err := j.Append(Record{Op: OpInstall, Event: EventBegin, Step: "copy"}); err != nil {
		t.Fatal(err)
	}
	recs, err = j.Records()
	if err != nil || len(recs) != 2 || recs[1].Step != "copy" {
		t.Fatalf("after an append over a torn tail: %v, %v", recs, err)
	}
}

func TestJournalCorruptLineIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j, _ := OpenJournal(path)
	j.Append(Record{Op: OpInstall, Event: EventStart})
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("not json\n")
	f.Close()
	j.Append(Record{Op: OpInstall, Event: EventDone})
	if _, err := j.State(); err == nil || !strings.Contains(err.Error(), "line 2 is corrupt") {
		t.Fatalf("a corrupt middle line: err %v, want it named", err)
	}
}

func TestFaultsFromEnv(t *testing.T) {
	t.Setenv(EnvFail, "")
	t.Setenv(EnvKill, "")
	if f, err := FaultsFromEnv(nil); f != nil || err != nil {
		t.Fatalf("no variables: %v %v", f, err)
	}
	t.Setenv(EnvFail, "install:copy")
	f, err := FaultsFromEnv(nil)
	if err != nil || f.AfterDo("install", "copy") == nil || f.AfterDo("install", "verify") != nil || f.AfterDo("undo", "copy") != nil {
		t.Fatalf("fail install:copy: %v", err)
	}
	t.Setenv(EnvFail, "copy")
	if _, err := FaultsFromEnv(nil); err == nil || !strings.Contains(err.Error(), "<op>:<step>") {
		t.Fatalf("malformed %s: %v", EnvFail, err)
	}
	t.Setenv(EnvFail, "")
	t.Setenv(EnvKill, "install:copy")
	if _, err := FaultsFromEnv(nil); err == nil || !strings.Contains(err.Error(), "<op>:<step>:<event>") {
		t.Fatalf("malformed %s: %v", EnvKill, err)
	}
}

// failAt is a Faults that fails one step.
type failAt struct{ op, step string }

func (f failAt) AfterDo(op, step string) error {
	if op == f.op && step == f.step {
		return os.ErrInvalid
	}
	return nil
}
func (failAt) AfterRecord(string, string, string) {}

func TestRunnerFaultHook(t *testing.T) {
	r := newRunner(t)
	r.Faults = failAt{"install", "b"}
	var trace []string
	err := r.Run(t.Context(), testPlan(&trace, ""))
	if err == nil || !strings.Contains(err.Error(), `step "b" failed`) {
		t.Fatalf("err = %v", err)
	}
	if strings.Join(trace, ",") != "do a,do b,undo b,undo a" {
		t.Fatalf("trace %v", trace)
	}
}
