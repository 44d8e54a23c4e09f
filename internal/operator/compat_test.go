package operator

import (
	"testing"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

func TestAdoptOlderStatus(t *testing.T) {
	for _, tc := range []struct {
		name          string
		in            v1.InstallationStatus
		attempt, jchk int32
	}{
		{"an older operator's journal check in wait-ready", v1.InstallationStatus{Step: v1.StepWaitReady, Attempt: 2}, 0, 2},
		{"already in the new form", v1.InstallationStatus{Step: v1.StepWaitReady, JournalCheck: 3}, 0, 3},
		{"another step's attempt stays", v1.InstallationStatus{Step: v1.StepStore, Attempt: 2}, 2, 0},
	} {
		in := &v1.Installation{Status: tc.in}
		adoptOlderStatus(in)
		if st := in.Status; st.Attempt != tc.attempt || st.JournalCheck != tc.jchk {
			t.Errorf("%s: attempt %d, journalCheck %d; want %d, %d", tc.name, st.Attempt, st.JournalCheck, tc.attempt, tc.jchk)
		}
	}
}

// TestAdoptOlderRollback: a rollback recorded by an operator older than
// status.failed goes on with the failure taken from the node's message.
func TestAdoptOlderRollback(t *testing.T) {
	in := &v1.Installation{Status: v1.InstallationStatus{Phase: v1.PhaseFailed, Step: v1.StepRollbackWait, Node: "w1",
		Nodes: []v1.NodeStatus{{Name: "w1", State: v1.StepRollback.NodeState(), Message: "node w1 did not finish within 10m0s (spec.nodeTimeout)"}}}}
	adoptOlderStatus(in)
	f := in.Status.Failed
	if f == nil || f.Node != "w1" || f.Op != v1.OperationInstall || f.RetryStep != v1.StepRuntime || f.Cause != "node w1 did not finish within 10m0s (spec.nodeTimeout)" {
		t.Fatalf("status.failed = %+v; want the node's runtime step, its message as cause", f)
	}
	if got := rollbackLine(in, "waiting"); got != "node w1 failed (node w1 did not finish within 10m0s (spec.nodeTimeout)); rolling back: rollback-wait: waiting" {
		t.Errorf("rollbackLine = %q", got)
	}
}
