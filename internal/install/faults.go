package install

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
)

// Faults makes a run fail or die at a chosen point, for tests that prove
// every step can be rolled back or finished. The runner calls it at two
// points; a nil Faults (production) injects nothing.
type Faults interface {
	// AfterDo may turn the success of step's Do into a failure.
	AfterDo(op, step string) error
	// AfterRecord runs right after the journal recorded event (EventBegin,
	// EventEnd, ...) for step; it may end the process.
	AfterRecord(op, step, event string)
}

// Environment variables read by FaultsFromEnv (the cmd layer, never the
// runner): QK_INSTALL_FAIL=<op>:<step> fails the step after its Do ran;
// QK_INSTALL_KILL=<op>:<step>:<event> kills the process with SIGKILL right
// after the journal records that event.
const (
	EnvFail = "QK_INSTALL_FAIL"
	EnvKill = "QK_INSTALL_KILL"
)

// envFaults is Faults from EnvFail and EnvKill.
type envFaults struct {
	fail, kill string
	log        *slog.Logger
}

// FaultsFromEnv returns the faults the environment asks for, or nil when it
// asks for none. A malformed value is an error naming the expected form.
func FaultsFromEnv(log *slog.Logger) (Faults, error) {
	f := envFaults{fail: os.Getenv(EnvFail), kill: os.Getenv(EnvKill), log: log}
	if f.fail == "" && f.kill == "" {
		return nil, nil
	}
	if f.fail != "" && strings.Count(f.fail, ":") != 1 {
		return nil, fmt.Errorf("%s=%q: want <op>:<step>, e.g. install:copy", EnvFail, f.fail)
	}
	if f.kill != "" && strings.Count(f.kill, ":") != 2 {
		return nil, fmt.Errorf("%s=%q: want <op>:<step>:<event>, e.g. install:copy:begin", EnvKill, f.kill)
	}
	return f, nil
}

func (f envFaults) AfterDo(op, step string) error {
	if f.fail == op+":"+step {
		return errors.New("fault injected by " + EnvFail)
	}
	return nil
}

func (f envFaults) AfterRecord(op, step, event string) {
	if f.kill != op+":"+step+":"+event {
		return
	}
	f.log.Warn("fault injection: killing myself", "op", op, "step", step, "event", event)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL cannot be caught: this never returns
}
