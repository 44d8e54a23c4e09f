package hostrun

import (
	"encoding/json"
	"fmt"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// State is what a host pod found (Result.State).
type State string

// Result states.
const (
	StateDone       State = "done"        // the operation stands (journal: done)
	StateRolledBack State = "rolled-back" // the run failed and was put back
	StateRunning    State = "running"     // the unit still runs (reported when only checking)
	StateStarted    State = "started"     // the unit was started; following was cut short
	StateNone       State = "none"        // no run of this operation on record
	// StateRefused: the host command refused before it changed anything
	// (its preflight, or a recorded state that no longer stands); Detail is
	// its one-line reason.
	StateRefused State = "refused"
)

// Result is the termination message of a host pod.
type Result struct {
	Subject v1.Subject   `json:"subject"`
	Op      v1.Operation `json:"op"`
	State   State        `json:"state"`
	// Detail is the failing step's error, or a measurement ("API-server
	// downtime: 6.4s") from the run's output.
	Detail string `json:"detail,omitempty"`
}

// ParseResult reads a termination message.
func ParseResult(msg string) (Result, error) {
	var r Result
	if err := json.Unmarshal([]byte(msg), &r); err != nil {
		return Result{}, fmt.Errorf("parse host pod result %q: %w", msg, err)
	}
	return r, nil
}

// String is the Result as one JSON line.
func (r Result) String() string {
	b, _ := json.Marshal(r) // cannot fail: a struct of strings
	return string(b)
}
