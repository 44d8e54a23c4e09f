package hostrun

import (
	"fmt"
	"path/filepath"
)

// HostRoot is where the host's root is seen from a hostPID pod.
const HostRoot = "/proc/1/root"

// Subjects and operations the host pods run.
var (
	Subjects = []string{"store", "runtime"}
	Ops      = []string{"install", "undo"}
)

// Target is one host operation.
type Target struct {
	Subject string // "store" or "runtime"
	Op      string // "install" or "undo"
}

// Validate refuses unknown subjects and operations.
func (t Target) Validate() error {
	if !contains(Subjects, t.Subject) {
		return fmt.Errorf("subject %q is not one of %v", t.Subject, Subjects)
	}
	if !contains(Ops, t.Op) {
		return fmt.Errorf("operation %q is not one of %v", t.Op, Ops)
	}
	return nil
}

// Journal is the subject's journal on the host (as the installers write it:
// /var/lib/quantykube/install/<subject>/journal.jsonl).
func (t Target) Journal() string {
	return filepath.Join("/var/lib/quantykube/install", t.Subject, "journal.jsonl")
}

// Output is where the unit's stdout and stderr go on the host.
func (t Target) Output() string {
	return filepath.Join("/var/lib/quantykube/install", t.Subject, "operator-"+t.Op+".log")
}

// Unit is the transient systemd unit that runs the operation.
func (t Target) Unit() string { return "quantykube-" + t.Op + "-" + t.Subject }

// BinaryDir is where the host pods put this binary on the host.
const BinaryDir = "/var/lib/quantykube/bin"

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
