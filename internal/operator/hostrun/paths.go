package hostrun

import (
	"fmt"
	"path/filepath"
	"slices"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/internal/install/hamove"
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
	// HA is, for the store of a control plane of several nodes, the HA
	// move's node step (`quantykube install|undo store --ha HA`, hamove);
	// "" for every other operation. Each HA step has its own journal, unit
	// and output file.
	HA string
}

// Validate refuses unknown subjects and operations.
func (t Target) Validate() error {
	if !slices.Contains(Subjects, t.Subject) {
		return fmt.Errorf("subject %q is not one of %v", t.Subject, Subjects)
	}
	if !slices.Contains(Ops, t.Op) {
		return fmt.Errorf("operation %q is not one of %v", t.Op, Ops)
	}
	if t.HA != "" && (t.Subject != v1.SubjectStore || !hamove.KnownStep(t.HA, t.Op == v1.OperationUndo)) {
		return fmt.Errorf("--ha %s is not a step of %s store; the steps are %v (install) and %v (undo)", t.HA, t.Op, hamove.InstallSteps, hamove.UndoSteps)
	}
	return nil
}

// Journal is the subject's journal on the host (as the installers write it:
// /var/lib/quantykube/install/<subject>/journal.jsonl).
func (t Target) Journal() string {
	if t.HA != "" {
		// hamove's per-step journal under its default state dir.
		return filepath.Join(haStateDir, t.HA, "journal.jsonl")
	}
	return filepath.Join("/var/lib/quantykube/install", string(t.Subject), "journal.jsonl")
}

// Output is where the unit's stdout and stderr go on the host.
func (t Target) Output() string {
	if t.HA != "" {
		return filepath.Join(haStateDir, "operator-"+string(t.Op)+"-"+t.HA+".log")
	}
	return filepath.Join("/var/lib/quantykube/install", string(t.Subject), "operator-"+string(t.Op)+".log")
}

// Unit is the transient systemd unit that runs the operation.
func (t Target) Unit() string {
	if t.HA != "" {
		return "quantykube-" + string(t.Op) + "-" + string(t.Subject) + "-ha-" + t.HA
	}
	return "quantykube-" + string(t.Op) + "-" + string(t.Subject)
}

// haStateDir is hamove's state dir on the host (hamove.DefaultPaths).
var haStateDir = hamove.DefaultPaths().StateDir

// Opposite is the operation on the same subject that undoes t's (undo for
// install, install for undo).
func (t Target) Opposite() Target {
	if t.Op == v1.OperationUndo {
		return Target{Subject: t.Subject, Op: v1.OperationInstall, HA: t.HA}
	}
	return Target{Subject: t.Subject, Op: v1.OperationUndo, HA: t.HA}
}

// BinaryDir is where the host pods put this binary on the host.
const BinaryDir = "/var/lib/quantykube/bin"
