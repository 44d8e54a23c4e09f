package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Record is one line of a journal.
type Record struct {
	Time time.Time `json:"time"`
	// Op is one of the Op* constants.
	Op string `json:"op"`
	// Event is one of the Event* constants.
	Event string `json:"event"`
	Step  string `json:"step,omitempty"`
	// Detail is free text: an error, a measurement.
	Detail string `json:"detail,omitempty"`
}

// Operations a journal records.
const (
	OpInstall = "install" // move the subject onto QuantyKube
	OpUndo    = "undo"    // move it back, carrying what changed meanwhile
	// OpReattach puts a subject found moved away behind QuantyKube's back
	// (its recorded state no longer stands) back onto QuantyKube.
	OpReattach = "reattach"
	// OpRelease accepts that the subject was moved back behind
	// QuantyKube's back: QuantyKube's side is set aside, nothing copied.
	OpRelease = "release"
)

// InstalledAfter reports whether a finished op leaves the subject installed.
func InstalledAfter(op string) bool { return op == OpInstall || op == OpReattach }

// Journal events.
const (
	EventStart      = "start"       // a run of Op begins
	EventBegin      = "begin"       // Step begins
	EventEnd        = "end"         // Step ended well
	EventFail       = "fail"        // Step failed (Detail: why)
	EventUndoBegin  = "undo-begin"  // Step is being put back
	EventUndoEnd    = "undo-end"    // Step was put back
	EventDone       = "done"        // Op finished: the new state stands
	EventRolledBack = "rolled-back" // Op was put back entirely
)

// Journal is an append-only, fsynced log of a subject's runs.
type Journal struct {
	path string
}

// OpenJournal opens the journal at path; nothing is created until the
// first Append.
func OpenJournal(path string) (*Journal, error) {
	return &Journal{path: path}, nil
}

// Path is the journal's file.
func (j *Journal) Path() string { return j.path }

// Append writes r and fsyncs it before returning. A torn last line (a
// crash in the middle of an earlier Append) is cut off first: it never
// counted, and a line written after it must not be glued to it.
func (j *Journal) Append(r Record) error {
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(j.path), 0o700); err != nil {
		return fmt.Errorf("create journal directory: %w", err)
	}
	f, err := os.OpenFile(j.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open journal %s: %w", j.path, err)
	}
	defer f.Close()
	end, err := cutTornTail(f)
	if err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	if _, err := f.WriteAt(append(line, '\n'), end); err != nil {
		return fmt.Errorf("write journal %s: %w", j.path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync journal %s: %w", j.path, err)
	}
	return nil
}

// cutTornTail truncates f after its last newline and returns its new size.
func cutTornTail(f *os.File) (int64, error) {
	data, err := io.ReadAll(f)
	if err != nil {
		return 0, err
	}
	end := int64(bytes.LastIndexByte(data, '\n') + 1)
	if end == int64(len(data)) {
		return end, nil
	}
	if err := f.Truncate(end); err != nil {
		return 0, fmt.Errorf("cut its torn last line: %w", err)
	}
	return end, nil
}

// Records reads every record. A torn last line (no newline: a crash
// mid-write) is ignored: its step was never recorded as begun. Any other
// line that does not parse is an error: the journal cannot be trusted to
// say what was done, so nothing may act on it.
func (j *Journal) Records() ([]Record, error) {
	data, err := os.ReadFile(j.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read journal %s: %w", j.path, err)
	}
	lines := bytes.Split(data, []byte{'\n'})
	lines = lines[:len(lines)-1] // the torn tail, or "" after the last newline
	out := make([]Record, 0, len(lines))
	for i, l := range lines {
		var r Record
		if err := json.Unmarshal(l, &r); err != nil {
			return nil, fmt.Errorf("journal %s line %d is corrupt (%v): nothing is done on a journal that cannot be read; look at it, then move it aside if the host is as you expect", j.path, i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// State summarises the journal: the last run, and whether it finished.
type State struct {
	// Op of the last run ("" if none).
	Op string
	// Finished is EventDone or EventRolledBack for a finished run, "" for an
	// interrupted one.
	Finished string
	// Begun lists the steps of the last run that began, in order.
	Begun []string
	// Ended holds the steps of the last run that ended well.
	Ended map[string]bool
	// Undone holds the steps of the last run already put back.
	Undone map[string]bool
	// Installed reports whether the subject is in its installed state: the
	// last finished install was done and not undone since.
	Installed bool
}

// State reads the journal's state.
func (j *Journal) State() (State, error) {
	recs, err := j.Records()
	if err != nil {
		return State{}, err
	}
	var st State
	for _, r := range recs {
		switch r.Event {
		case EventStart:
			st.Op, st.Finished, st.Begun = r.Op, "", nil
			st.Ended, st.Undone = map[string]bool{}, map[string]bool{}
		case EventBegin:
			st.Begun = append(st.Begun, r.Step)
		case EventEnd:
			st.Ended[r.Step] = true
		case EventUndoEnd:
			st.Undone[r.Step] = true
		case EventDone:
			st.Finished = EventDone
			st.Installed = InstalledAfter(r.Op)
		case EventRolledBack:
			st.Finished = EventRolledBack
		}
	}
	return st, nil
}
