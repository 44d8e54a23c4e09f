package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// Scenarios of TestReconcilerRealAPIServer about the node a failure leaves
// behind (putback.go). A node not cordoned before is uncordoned after its
// rollback in testNodeHangs, and after its installer's own rollback in
// testRuntimeRollsBack.

// testCordonedBeforeStaysCordoned: a node cordoned before the move that
// passes its deadline is rolled back by its own undo and left cordoned, as
// it was; a retry then resumes at its runtime step (it stayed cordoned and
// drained), and the finished move leaves it cordoned too.
func testCordonedBeforeStaysCordoned(t *testing.T, api *testAPI) {
	w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
	n := getNode(t, api.Client, "w1")
	n.Spec.Unschedulable = true
	if err := api.Client.Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	w.hosts.silent["w1"] = true
	in := defaultInstallation()
	in.Spec.NodeTimeout = &metav1.Duration{Duration: testNodeTimeout}
	mustCreate(t, api.Client, in)
	w.passUntil(t, passPace, testNodeTimeout+deadlineSlack, "rolling back for the deadline", func(in *v1.Installation) bool {
		return in.Status.Step == v1.StepRollback
	})
	w.hosts.silent["w1"] = false
	got := w.passUntil(t, passPace, time.Minute, "the rollback ended", func(in *v1.Installation) bool { return in.Status.Step == "" })
	if !strings.Contains(got.Status.Message, "rolled back: Ready on containerd://") || !strings.Contains(got.Status.Message, "left cordoned, as it was before the move") {
		t.Fatalf("after the rollback: %q; want rolled back, left cordoned", got.Status.Message)
	}
	if ns := got.Status.Nodes[0]; !getNode(t, api.Client, "w1").Spec.Unschedulable || !ns.WasCordoned || !ns.CordonRecorded {
		t.Errorf("after the rollback: w1 schedulable, or its record %+v lost that it was cordoned before", ns)
	}
	if f := got.Status.Failed; f == nil || f.RetryStep != v1.StepRuntime {
		t.Errorf("status.failed = %+v; want a retry from the runtime step (the node stayed cordoned and drained)", f)
	}
	patchRetry(t, api.Client, 1)
	steps, got := w.runUntil(t, 60, v1.PhaseMoved)
	if len(steps) == 0 || steps[0] != "runtime@w1" {
		t.Errorf("steps of the retry %v; want them to begin at runtime@w1", steps)
	}
	checkGoal(t, got, v1.PhaseMoved)
	if !getNode(t, api.Client, "w1").Spec.Unschedulable {
		t.Error("w1 uncordoned at the end of the move; it was cordoned before")
	}
}
