package hostrun

import (
	"time"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/internal/install"
)

// lastRun summarises the last run recorded in a journal.
type lastRun struct {
	Op       v1.Operation
	Started  time.Time
	Finished string // install.EventDone, install.EventRolledBack or "" (running or interrupted)
	Failure  string // the last failing step and its error
	// Installed reports whether the subject stands installed.
	Installed bool
}

func readLastRun(path string) (lastRun, error) {
	j, err := install.OpenJournal(path)
	if err != nil {
		return lastRun{}, err
	}
	recs, err := j.Records()
	if err != nil {
		return lastRun{}, err
	}
	st, err := j.State()
	if err != nil {
		return lastRun{}, err
	}
	var lr lastRun
	for _, r := range recs {
		switch r.Event {
		case install.EventStart:
			lr = lastRun{Op: v1.Operation(r.Op), Started: r.Time}
		case install.EventFail:
			lr.Failure = r.Step + ": " + r.Detail
		case install.EventDone, install.EventRolledBack:
			lr.Finished = r.Event
		}
	}
	lr.Installed = st.Installed
	return lr, nil
}

// satisfied reports whether op's goal already stands: install → the subject
// is installed; undo → it is not (a subject never installed needs no undo).
func (lr lastRun) satisfied(op v1.Operation) bool {
	if lr.Op != "" && lr.Finished == "" {
		return false // a run is in flight or was interrupted
	}
	if op == v1.OperationInstall {
		return lr.Installed
	}
	return !lr.Installed
}
