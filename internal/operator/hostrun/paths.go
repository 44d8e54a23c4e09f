package hostrun

import (
	"fmt"
	"path/filepath"
	"slices"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// HostRoot is where the host's root is seen from a hostPID pod.
const HostRoot = "/proc/1/root"

// Subjects and operations the host pods run.
var (
	Subjects = []v1.Subject{v1.SubjectStore, v1.SubjectRuntime}
	Ops      = []v1.Operation{v1.OperationInstall, v1.OperationUndo}
)

// Target is one host operation.
type Target struct {
	Subject v1.Subject
	Op      v1.Operation
}

// Validate refuses unknown subjects and operations.
func (t Target) Validate() error {
	if !slices.Contains(Subjects, t.Subject) {
		return fmt.Errorf("subject %q is not one of %v", t.Subject, Subjects)
	}
	if !slices.Contains(Ops, t.Op) {
		return fmt.Errorf("operation %q is not one of %v", t.Op, Ops)
	}
	return nil
}

// Journal is the subject's journal on the host (as the installers write it:
// /var/lib/quantykube/install/<subject>/journal.jsonl).
func (t Target) Journal() string {
	return filepath.Join("/var/lib/quantykube/install", string(t.Subject), "journal.jsonl")
}

// Output is where the unit's stdout and stderr go on the host.
func (t Target) Output() string {
	return filepath.Join("/var/lib/quantykube/install", string(t.Subject), "operator-"+string(t.Op)+".log")
}

// Unit is the transient systemd unit that runs the operation.
func (t Target) Unit() string { return "quantykube-" + string(t.Op) + "-" + string(t.Subject) }

// Opposite is the operation on the same subject that undoes t's (undo for
// install, install for undo).
func (t Target) Opposite() Target {
	if t.Op == v1.OperationUndo {
		return Target{Subject: t.Subject, Op: v1.OperationInstall}
	}
	return Target{Subject: t.Subject, Op: v1.OperationUndo}
}

// BinaryDir is where the host pods put this binary on the host.
const BinaryDir = "/var/lib/quantykube/bin"
