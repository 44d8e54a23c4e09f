package operator

import (
	"errors"
	"testing"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// TestRetryStep: a retry resumes at the failed step unless the failure put
// back what the earlier steps did; a failed wait-ready runs its runtime
// step again.
func TestRetryStep(t *testing.T) {
	for _, tc := range []struct {
		name    string
		op      v1.Operation
		failed  task
		putBack bool
		want    v1.Step
		line    string
	}{
		{"store", v1.OperationInstall, task{Step: v1.StepStore}, false, v1.StepStore,
			"set spec.retry to 4: the install resumes at the store step"},
		{"preflight", v1.OperationInstall, task{Step: v1.StepPreflight, Node: "w1"}, false, v1.StepPreflight,
			"set spec.retry to 4: the install resumes at node w1's preflight step"},
		{"drain, uncordoned again", v1.OperationInstall, task{Step: v1.StepDrain, Node: "w1"}, true, v1.StepPreflight,
			"set spec.retry to 4: the install resumes at node w1's preflight step (its drain failed and it was put back as it was before the run)"},
		{"drain of an undo, uncordoned again", v1.OperationUndo, task{Step: v1.StepDrain, Node: "w1"}, true, v1.StepCordon,
			"set spec.retry to 4: the undo resumes at node w1's cordon step (its drain failed and it was put back as it was before the run)"},
		{"drain of a node cordoned before", v1.OperationInstall, task{Step: v1.StepDrain, Node: "w1"}, false, v1.StepDrain,
			"set spec.retry to 4: the install resumes at node w1's drain step"},
		{"wait-ready", v1.OperationInstall, task{Step: v1.StepWaitReady, Node: "w1"}, false, v1.StepRuntime,
			"set spec.retry to 4: the install resumes at node w1's runtime step (its wait-ready failed)"},
		{"uncordon", v1.OperationUndo, task{Step: v1.StepUncordon, Node: "w1"}, false, v1.StepUncordon,
			"set spec.retry to 4: the undo resumes at node w1's uncordon step"},
	} {
		in := &v1.Installation{Status: v1.InstallationStatus{ObservedRetry: 3}}
		recordFailed(in, tc.op, tc.failed, errors.New("boom"), tc.putBack)
		if f := in.Status.Failed; f.RetryStep != tc.want || f.Retry != tc.line || f.Step != tc.failed.Step || f.Cause != "boom" {
			t.Errorf("%s: failed %+v; want retry step %s, line %q", tc.name, f, tc.want, tc.line)
		}
	}
}

// TestResumeAt: only a run in the failed run's direction, on the failed
// node (or the store), resumes; any other starts where firstTask says.
func TestResumeAt(t *testing.T) {
	st := &v1.InstallationStatus{Phase: v1.PhaseFailed,
		Failed: &v1.FailedRun{Op: v1.OperationInstall, Step: v1.StepWaitReady, Node: "w2", RetryStep: v1.StepRuntime}}
	first := task{Step: v1.StepPreflight, Node: "w2"}
	if got, ok := resumeAt(st, false, first); !ok || got != (task{Step: v1.StepRuntime, Node: "w2"}) {
		t.Errorf("retry of the move: %+v %v; want runtime on w2", got, ok)
	}
	if got, ok := resumeAt(st, true, task{Step: v1.StepCordon, Node: "w2"}); ok || got.Step != v1.StepCordon {
		t.Errorf("an undo after a failed move: %+v %v; want its own first step", got, ok)
	}
	if got, ok := resumeAt(st, false, task{Step: v1.StepStore}); ok || got.Step != v1.StepStore {
		t.Errorf("a move whose first task is another (spec.store changed): %+v %v; want that task", got, ok)
	}
	st.Phase = v1.PhaseMoved
	if _, ok := resumeAt(st, false, first); ok {
		t.Error("resumed although the installation is not Failed")
	}
}
