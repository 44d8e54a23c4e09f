package hostrun

import (
	"encoding/json"
	"fmt"
)

// Result states.
const (
	StateDone       = "done"        // the operation stands (journal: done)
	StateRolledBack = "rolled-back" // the run failed and was put back
	StateRunning    = "running"     // the unit still runs (reported when only checking)
	StateStarted    = "started"     // the unit was started; following was cut short
	StateNone       = "none"        // no run of this operation on record
	// StateRefused: the host command refused before it changed anything
	// (its preflight, or a recorded state that no longer stands); Detail is
	// its one-line reason.
	StateRefused = "refused"
)

// Result is the termination message of a host pod.
type Result struct {
	Subject string `json:"subject"`
	Op      string `json:"op"`
	State   string `json:"state"`
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

func (r Result) String() string {
	b, _ := json.Marshal(r)
	return string(b)
}
