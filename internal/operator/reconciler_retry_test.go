package operator

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// Scenarios of TestReconcilerRealAPIServer about spec.retry (retry.go).

// failAtW2Runtime runs a move of the store, w1 and w2 in which every host
// pod of w2's runtime step dies without a result: the Installation is
// Failed at that step, with w2 cordoned and drained (its host state
// unknown), the store and w1 moved.
func failAtW2Runtime(t *testing.T, api *testAPI) *world {
	t.Helper()
	w := newWorld(t, api, true, []string{"cp1"}, []string{"w1", "w2"})
	w.hosts.die["w2"] = true
	mustCreate(t, api.Client, defaultInstallation())
	_, in := w.runUntil(t, 120, v1.PhaseFailed)
	f := in.Status.Failed
	if f == nil || f.Op != v1.OperationInstall || f.Step != v1.StepRuntime || f.Node != "w2" || f.RetryStep != v1.StepRuntime || !strings.Contains(f.Cause, "died 3 times") {
		t.Fatalf("status.failed = %+v; want install, runtime on w2, retried from runtime, the pods' deaths as cause", f)
	}
	if in.Status.Store != v1.PhaseMoved || in.Status.Nodes[0].State != v1.NodeStateMoved || !getNode(t, api.Client, "w2").Spec.Unschedulable {
		t.Fatalf("store %s, w1 %s, w2 cordoned %v; want Moved, Moved, cordoned", in.Status.Store, in.Status.Nodes[0].State, getNode(t, api.Client, "w2").Spec.Unschedulable)
	}
	return w
}

// testRetryResumesAtFailedStep: spec.retry resumes the failed run at the
// step that failed — w2's runtime step — and reaches Moved without moving
// the store or w1 again. Before the retry, the status says what it will do.
func testRetryResumesAtFailedStep(t *testing.T, api *testAPI) {
	w := failAtW2Runtime(t, api)
	in := w.installation(t)
	want := "set spec.retry to 1: the install resumes at node w2's runtime step"
	if got := in.Status.Failed.Retry; got != want {
		t.Errorf("status.failed.retry (kubectl get's Retry column) = %q; want %q", got, want)
	}
	if d := meta.FindStatusCondition(in.Status.Conditions, v1.ConditionDegraded); d == nil || !strings.Contains(d.Message, want) {
		t.Errorf("Degraded = %+v; want it to say %q", d, want)
	}
	checkFailed(t, in, v1.ReasonStepFailed)
	storePods := w.hosts.pods["qk-install-store-run-cp1-1"]

	w.hosts.die["w2"] = false
	patchRetry(t, api.Client, 1)
	w.pass(t)
	if in := w.installation(t); in.Status.ObservedRetry != 1 || in.Status.Failed != nil || in.Status.Step != v1.StepRuntime || in.Status.Node != "w2" {
		t.Fatalf("the pass that saw spec.retry 1: observedRetry %d, failed %+v, step %s on %q; want 1, cleared, runtime on w2 (one write)",
			in.Status.ObservedRetry, in.Status.Failed, in.Status.Step, in.Status.Node)
	}
	steps, in := w.runUntil(t, 60, v1.PhaseMoved)
	if want := []string{"runtime@w2", "wait-ready@w2", "uncordon@w2"}; !reflect.DeepEqual(steps, want) {
		t.Errorf("steps of the retry: %v; want %v (the store and w1 not again, w2 from its runtime step)", steps, want)
	}
	checkGoal(t, in, v1.PhaseMoved)
	if n := w.hosts.pods["qk-install-store-run-cp1-1"]; n != storePods {
		t.Errorf("the store's host pod was seen %d times after the retry, %d before: the store moved again", n, storePods)
	}
	if n := getNode(t, api.Client, "w2"); n.Spec.Unschedulable || n.Status.NodeInfo.ContainerRuntimeVersion != "quantykube://0.1.0" {
		t.Errorf("w2 after the retry: cordoned %v, runtime %s; want schedulable on quantykube", n.Spec.Unschedulable, n.Status.NodeInfo.ContainerRuntimeVersion)
	}
}

// testRetryActsOnce: a spec.retry value is acted on once. The retry fails
// again; passes by restarted operators (every pass is one) see the same
// value and change nothing; the next value retries again.
func testRetryActsOnce(t *testing.T, api *testAPI) {
	w := failAtW2Runtime(t, api)
	patchRetry(t, api.Client, 1)
	_, in := w.runUntil(t, 60, v1.PhaseFailed)
	if in.Status.ObservedRetry != 1 || in.Status.Failed == nil || !strings.Contains(in.Status.Failed.Retry, "set spec.retry to 2") {
		t.Fatalf("after the retry failed again: observedRetry %d, failed %+v; want 1, asking for 2", in.Status.ObservedRetry, in.Status.Failed)
	}
	pods := len(w.hosts.pods)
	for i := 0; i < 5; i++ {
		w.pass(t)
	}
	if got := w.installation(t); got.ResourceVersion != in.ResourceVersion || len(w.hosts.pods) != pods {
		t.Fatalf("spec.retry 1, already acted on, was acted on again: %d host pods (was %d), status %s", len(w.hosts.pods), pods, got.Status.Message)
	}
	w.hosts.die["w2"] = false
	patchRetry(t, api.Client, 2)
	_, in = w.runUntil(t, 60, v1.PhaseMoved)
	checkGoal(t, in, v1.PhaseMoved)
	if in.Status.ObservedRetry != 2 {
		t.Errorf("observedRetry %d; want 2", in.Status.ObservedRetry)
	}
}

func patchRetry(t *testing.T, c client.Client, n int64) {
	t.Helper()
	in := &v1.Installation{ObjectMeta: metav1.ObjectMeta{Name: v1.Name}}
	p := []byte(fmt.Sprintf(`{"spec":{"retry":%d}}`, n))
	if err := c.Patch(context.Background(), in, client.RawPatch(types.MergePatchType, p)); err != nil {
		t.Fatalf("patch retry=%d: %v", n, err)
	}
}
