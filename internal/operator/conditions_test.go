package operator

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// Each condition has its own reason and message, at the spec's generation.
func TestSetConditions(t *testing.T) {
	yes, no := metav1.ConditionTrue, metav1.ConditionFalse
	type want struct {
		status  metav1.ConditionStatus
		reason  string
		message string // a part of it
	}
	for _, tc := range []struct {
		name                         string
		st                           v1.InstallationStatus
		undo                         bool
		f                            *failure
		ready, progressing, degraded want
	}{
		{"goal", v1.InstallationStatus{Phase: v1.PhaseMoved, Step: v1.StepDone, Store: v1.PhaseMoved, Message: "store moved"}, false, nil,
			want{yes, v1.ReasonGoalReached, "store moved"}, want{no, v1.ReasonIdle, "the goal stands"}, want{no, v1.ReasonAsExpected, "nothing failed"}},
		{"a step runs", v1.InstallationStatus{Phase: v1.PhaseMoving, Step: v1.StepDrain, Node: "w1", Message: "node 1 of 1 moving (w1): drain: draining"}, false, nil,
			want{no, string(v1.PhaseMoving), "asks for Moved"}, want{yes, v1.ReasonStepRunning, "draining"}, want{no, v1.ReasonAsExpected, ""}},
		{"turned around between steps", v1.InstallationStatus{Phase: v1.PhaseMoving, Message: "the run to Undone starts next"}, true, nil,
			want{no, string(v1.PhaseMoving), "asks for Undone"}, want{yes, v1.ReasonStepRunning, "starts next"}, want{no, v1.ReasonAsExpected, ""}},
		{"failed", v1.InstallationStatus{Phase: v1.PhaseFailed, Message: "node w1: drain failed"}, false, &failure{v1.ReasonStepFailed, "node w1: drain failed; set spec.undo"},
			want{no, string(v1.PhaseFailed), ""}, want{no, v1.ReasonIdle, "spec change"}, want{yes, v1.ReasonStepFailed, "spec.undo"}},
		{"rolling back", v1.InstallationStatus{Phase: v1.PhaseFailed, Step: v1.StepRollback, Node: "w1", Message: "rolling back"}, false, &failure{v1.ReasonNodeTimedOut, "node w1: late"},
			want{no, string(v1.PhaseFailed), ""}, want{yes, v1.ReasonStepRunning, "rolling back"}, want{yes, v1.ReasonNodeTimedOut, "late"}},
		{"refused", v1.InstallationStatus{}, false, &failure{v1.ReasonUnsupported, "not made by kubeadm"},
			want{no, string(v1.PhasePending), ""}, want{no, v1.ReasonIdle, ""}, want{yes, v1.ReasonUnsupported, "kubeadm"}},
	} {
		in := &v1.Installation{Spec: v1.InstallationSpec{Undo: tc.undo}, Status: tc.st}
		in.Generation = 7
		setConditions(in, tc.f)
		for typ, w := range map[string]want{v1.ConditionReady: tc.ready, v1.ConditionProgressing: tc.progressing, v1.ConditionDegraded: tc.degraded} {
			c := meta.FindStatusCondition(in.Status.Conditions, typ)
			if c == nil || c.Status != w.status || c.Reason != w.reason || !strings.Contains(c.Message, w.message) || c.Message == "" || c.ObservedGeneration != 7 {
				t.Errorf("%s: %s = %+v; want %s, %s, a message with %q, generation 7", tc.name, typ, c, w.status, w.reason, w.message)
			}
		}
	}
}
