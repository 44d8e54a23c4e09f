package operator

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// Scenarios of TestReconcilerRealAPIServer about the store step's deadline
// (deadline.go, step_rollback.go).

// testStoreDeadline: the store's host run hangs past spec.storeTimeout: the
// Installation turns Failed at once, visibly (Degraded StoreTimedOut, a
// Warning Event), and undo store rolls the store back; no node is touched.
// spec.retry then moves it again, from the store step.
func testStoreDeadline(t *testing.T, api *testAPI) {
	w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
	w.hosts.silent["cp1"] = true
	in := defaultInstallation()
	in.Spec.StoreTimeout = &metav1.Duration{Duration: testNodeTimeout}
	mustCreate(t, api.Client, in)
	got := w.passUntil(t, passPace, testNodeTimeout+deadlineSlack, "Failed for the store's deadline", func(in *v1.Installation) bool {
		return in.Status.Phase == v1.PhaseFailed
	})
	want := "install store failed: the store step did not finish within " + testNodeTimeout.String() + " (spec.storeTimeout)"
	if !strings.HasPrefix(got.Status.Message, want) || got.Status.Step != v1.StepRollback || got.Status.Store != v1.PhaseFailed {
		t.Fatalf("phase %s step %q store %s (%s); want Failed, rolling back, %q", got.Status.Phase, got.Status.Step, got.Status.Store, got.Status.Message, want)
	}
	if d := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionDegraded); d == nil || d.Status != metav1.ConditionTrue || d.Reason != v1.ReasonStoreTimedOut {
		t.Errorf("Degraded while rolling back = %+v; want True, %s", d, v1.ReasonStoreTimedOut)
	}
	if !slices.ContainsFunc(w.events, func(e string) bool { return strings.HasPrefix(e, "Warning StepFailed "+want) }) {
		t.Errorf("events %q; want a Warning StepFailed saying %q", w.events, want)
	}
	// The host answers again: undo store runs on cp1.
	w.hosts.silent["cp1"] = false
	got = w.passUntil(t, passPace, time.Minute, "the rollback ended", func(in *v1.Installation) bool { return in.Status.Step == "" })
	if got.Status.Phase != v1.PhaseFailed || !strings.Contains(got.Status.Message, "the store: the store step did not finish within "+testNodeTimeout.String()) || !strings.Contains(got.Status.Message, "rolled back (undo store)") {
		t.Fatalf("after the rollback: phase %s (%s); want Failed, rolled back", got.Status.Phase, got.Status.Message)
	}
	if w.hosts.installed["store/cp1"] || w.hosts.pods["qk-undo-store-run-cp1-1"] == 0 {
		t.Errorf("after the rollback: store installed %v, host pods %v; want undo store run on cp1", w.hosts.installed["store/cp1"], w.hosts.pods)
	}
	if !slices.ContainsFunc(w.events, func(e string) bool { return strings.HasPrefix(e, "Normal RolledBack the store:") }) {
		t.Errorf("events %q; want a RolledBack Event", w.events)
	}
	if n := getNode(t, api.Client, "w1"); n.Spec.Unschedulable || got.Status.Nodes[0].State != v1.NodeStatePending {
		t.Errorf("w1 touched by the store's failure: cordoned %v, state %s", n.Spec.Unschedulable, got.Status.Nodes[0].State)
	}
	checkFailed(t, got, v1.ReasonStoreTimedOut)
	noHostPods(t, api.Client)

	if f := got.Status.Failed; f == nil || f.RetryStep != v1.StepStore {
		t.Fatalf("status.failed = %+v; want a retry from the store step", f)
	}
	patchRetry(t, api.Client, 1)
	steps, got := w.runUntil(t, 60, v1.PhaseMoved)
	if len(steps) == 0 || steps[0] != "store@" {
		t.Errorf("steps of the retry %v; want the store first", steps)
	}
	checkGoal(t, got, v1.PhaseMoved)
}

// testHAStoreDeadlineFails: on three control planes the store's deadline
// fails the HA move where it stands, without a rollback (deadline.go says
// why); status.ha keeps the step in flight, spec.undo undoes the steps done.
func testHAStoreDeadlineFails(t *testing.T, api *testAPI) {
	w := newWorld(t, api, true, threeCPs, nil)
	w.hosts.silent["cp2"] = true // join/cp2 hangs
	in := defaultInstallation()
	in.Spec.StoreTimeout = &metav1.Duration{Duration: testNodeTimeout}
	mustCreate(t, api.Client, in)
	got := w.passUntil(t, passPace, testNodeTimeout+deadlineSlack, "Failed for the store's deadline", func(in *v1.Installation) bool {
		return in.Status.Phase == v1.PhaseFailed
	})
	if got.Status.Step != "" || !strings.Contains(got.Status.Message, "did not finish within "+testNodeTimeout.String()+" (spec.storeTimeout)") || got.Status.HA == nil || got.Status.HA.Step != "join/cp2" {
		t.Fatalf("step %q, status.ha %+v (%s); want Failed where it stands, at join/cp2", got.Status.Step, got.Status.HA, got.Status.Message)
	}
	checkFailed(t, got, v1.ReasonStepFailed)
	if f := got.Status.Failed; f == nil || !strings.Contains(f.Retry, "the store's HA step 2 of") {
		t.Errorf("status.failed = %+v; want a retry from the HA step in flight", f)
	}
}
