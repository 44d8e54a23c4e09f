package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// Scenarios of TestReconcilerRealAPIServer in which a node cannot finish.

// testNodeTimeout is spec.nodeTimeout where a scenario waits for it: long
// enough for the node's cordon and drain to end first on a loaded machine
// (CI's side lane, 7 December: 8 s ran out in the drain against a real API
// server that had taken 30 s to start), so the deadline hits the step the
// scenario makes hang.
const testNodeTimeout = 20 * time.Second

func testRuntimeRollsBack(t *testing.T, api *testAPI) {
	w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
	w.hosts.rollBack["w1"] = true
	mustCreate(t, api.Client, defaultInstallation())
	// The node stays on its old runtime: wait-ready asks its host journal,
	// numbering the check pods by journalCheck; attempt stays 0.
	checking := w.passUntil(t, passPace, time.Minute, "the journal check recorded", func(in *v1.Installation) bool {
		return in.Status.Step == v1.StepWaitReady && in.Status.JournalCheck > 0
	})
	if checking.Status.Attempt != 0 {
		t.Errorf("wait-ready with a journal check: attempt %d; want 0 (journalCheck %d counts the checks)", checking.Status.Attempt, checking.Status.JournalCheck)
	}
	_, in := w.runUntil(t, 60, v1.PhaseFailed)
	if w.hosts.pods["qk-install-runtime-check-w1-1"] == 0 {
		t.Errorf("host pods %v; want check pod 1 of w1", w.hosts.pods)
	}
	if in.Status.Store != v1.PhaseMoved {
		t.Errorf("store %q; want Moved (untouched by the node's failure)", in.Status.Store)
	}
	if ns := in.Status.Nodes[0]; ns.State != v1.NodeStateFailed || !strings.Contains(ns.Message, "injected fault") || ns.End == nil {
		t.Errorf("node status %+v; want Failed with the host's reason and an end time", ns)
	}
	checkFailed(t, in, v1.ReasonStepFailed)
	// The host put its work back: w1 is as it was before the move,
	// uncordoned (it was not cordoned before).
	if getNode(t, api.Client, "w1").Spec.Unschedulable || !strings.Contains(in.Status.Message, "uncordoned, as it was before the run") {
		t.Errorf("w1 cordoned after its install rolled back (message %q); it was not cordoned before the move", in.Status.Message)
	}
	// Failed waits for a spec change: more passes change nothing.
	before := in.ResourceVersion
	w.pass(t)
	if got := w.installation(t).ResourceVersion; got != before {
		t.Errorf("a Failed installation changed without a spec change")
	}
	// Undo from Failed moves back what was moved.
	w.hosts.rollBack["w1"] = false
	patchUndo(t, api.Client, true)
	_, in = w.runUntil(t, 80, v1.PhaseUndone)
	checkGoal(t, in, v1.PhaseUndone)
	// The failed run left w1 cordoned; it was not cordoned before us.
	if in.Status.Nodes[0].WasCordoned || getNode(t, api.Client, "w1").Spec.Unschedulable {
		t.Errorf("w1 left cordoned after the undo (wasCordoned=%v)", in.Status.Nodes[0].WasCordoned)
	}
}

// checkFailed checks the conditions of a Failed run that waits for a spec
// change: each with its own reason, Degraded saying what to do.
func checkFailed(t *testing.T, in *v1.Installation, reason string) {
	t.Helper()
	d := meta.FindStatusCondition(in.Status.Conditions, v1.ConditionDegraded)
	if d == nil || d.Status != metav1.ConditionTrue || d.Reason != reason || !strings.Contains(d.Message, "spec.undo") {
		t.Errorf("Degraded = %+v; want True, %s, saying what to do", d, reason)
	}
	r := meta.FindStatusCondition(in.Status.Conditions, v1.ConditionReady)
	p := meta.FindStatusCondition(in.Status.Conditions, v1.ConditionProgressing)
	if r == nil || r.Status != metav1.ConditionFalse || r.Reason != string(v1.PhaseFailed) || p == nil || p.Status != metav1.ConditionFalse || p.Reason != v1.ReasonIdle {
		t.Errorf("Ready = %+v, Progressing = %+v; want False (Failed), False (Idle)", r, p)
	}
}

func testNodeHangs(t *testing.T, api *testAPI) {
	w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
	w.hosts.silent["w1"] = true
	in := defaultInstallation()
	in.Spec.NodeTimeout = &metav1.Duration{Duration: testNodeTimeout}
	mustCreate(t, api.Client, in)
	// Passes paced in real time until the deadline has passed, and noticed
	// within deadlineSlack of it.
	got := w.passUntil(t, passPace, testNodeTimeout+deadlineSlack, "Failed for the deadline", func(in *v1.Installation) bool {
		return in.Status.Phase == v1.PhaseFailed
	})
	if !strings.Contains(got.Status.Message, "node w1: runtime failed: node w1 did not finish within "+testNodeTimeout.String()) {
		t.Fatalf("phase %s (%s); want Failed in the runtime step for the deadline", got.Status.Phase, got.Status.Message)
	}
	// Failed at once, and the node's own undo runs: until it ends the
	// node stays cordoned; the store stays moved.
	if got.Status.Step != v1.StepRollback || !getNode(t, api.Client, "w1").Spec.Unschedulable || got.Status.Store != v1.PhaseMoved {
		t.Errorf("after the deadline: step %q, w1 schedulable=%v, store %q; want rollback, cordoned, Moved",
			got.Status.Step, !getNode(t, api.Client, "w1").Spec.Unschedulable, got.Status.Store)
	}
	if d := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionDegraded); d == nil || d.Reason != v1.ReasonNodeTimedOut {
		t.Errorf("Degraded while rolling back = %+v; want reason %s", d, v1.ReasonNodeTimedOut)
	}
	if p := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionProgressing); p == nil || p.Status != metav1.ConditionTrue {
		t.Errorf("Progressing while rolling back = %+v; want True", p)
	}
	// The host answers again: undo runtime runs there, the node is Ready
	// on its old runtime and left as it was before the move: uncordoned
	// (it was not cordoned before); the Installation stays Failed.
	w.hosts.silent["w1"] = false
	got = w.passUntil(t, passPace, time.Minute, "the rollback ended", func(in *v1.Installation) bool { return in.Status.Step == "" })
	if got.Status.Phase != v1.PhaseFailed || !strings.Contains(got.Status.Message, "rolled back: Ready on containerd://") {
		t.Fatalf("after the rollback: phase %s, step %q (%s); want Failed, rolled back", got.Status.Phase, got.Status.Step, got.Status.Message)
	}
	if getNode(t, api.Client, "w1").Spec.Unschedulable || got.Status.Nodes[0].State != v1.NodeStateFailed || w.hosts.pods["qk-undo-runtime-run-w1-1"] == 0 {
		t.Errorf("after the rollback: w1 cordoned, node state %q, undo pods %v; want uncordoned, Failed, undone", got.Status.Nodes[0].State, w.hosts.pods)
	}
	if !strings.Contains(got.Status.Message, "uncordoned, as it was before the move") {
		t.Errorf("message %q; want it to say the node was uncordoned", got.Status.Message)
	}
	// A retry starts the node afresh: nothing of its earlier steps stands.
	if f := got.Status.Failed; f == nil || f.Step != v1.StepRuntime || f.RetryStep != v1.StepPreflight {
		t.Errorf("status.failed = %+v; want the runtime step failed, a retry from preflight", f)
	}
	checkFailed(t, got, v1.ReasonNodeTimedOut)
}

func testPreflightRefuses(t *testing.T, api *testAPI) {
	w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
	w.hosts.refuse["w1"] = "quantykube: the runtime's root dir /var/lib/quantykube/runtime is on overlayfs; mount a real filesystem there"
	mustCreate(t, api.Client, defaultInstallation())
	start := time.Now()
	_, got := w.runUntil(t, 40, v1.PhaseFailed)
	t.Logf("refusal in status %v after the run began", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(got.Status.Message, "node w1: preflight failed") || !strings.Contains(got.Status.Message, "overlayfs") {
		t.Errorf("message %q; want the preflight's refusal with the host's reason", got.Status.Message)
	}
	if n := getNode(t, api.Client, "w1"); n.Spec.Unschedulable || w.hosts.installed["runtime/w1"] {
		t.Errorf("after a refused preflight: w1 cordoned (%v) or its runtime installed", n.Spec.Unschedulable)
	}
	noHostPods(t, api.Client)
}

func testBudgetBlocksDrain(t *testing.T, api *testAPI) {
	ctx := context.Background()
	w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
	pdb := guardPod(t, api, "w1-app-a")
	defer func() {
		if err := api.Client.Delete(ctx, pdb); err != nil {
			t.Errorf("delete the budget: %v", err)
		}
	}()
	in := defaultInstallation()
	in.Spec.NodeTimeout = &metav1.Duration{Duration: testNodeTimeout}
	mustCreate(t, api.Client, in)
	_, got := w.runUntil(t, 60, v1.PhaseFailed)
	if !strings.Contains(got.Status.Message, "node w1: drain failed") || !strings.Contains(got.Status.Message, "PodDisruptionBudget") {
		t.Errorf("message %q; want the drain failed, naming the PodDisruptionBudget", got.Status.Message)
	}
	// Nothing else touched: the node is uncordoned, its runtime never ran.
	if getNode(t, api.Client, "w1").Spec.Unschedulable || w.hosts.installed["runtime/w1"] {
		t.Errorf("after a blocked drain: w1 cordoned or its runtime installed")
	}
	noHostPods(t, api.Client)
}

// guardPod makes the pod Running and Ready, labelled, under a
// PodDisruptionBudget that allows no disruption, and returns the budget.
func guardPod(t *testing.T, api *testAPI, name string) *policyv1.PodDisruptionBudget {
	t.Helper()
	ctx := context.Background()
	var p corev1.Pod
	if err := api.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	p.Labels = map[string]string{"app": "guarded"}
	if err := api.Client.Update(ctx, &p); err != nil {
		t.Fatal(err)
	}
	// A budget guards only running pods (a pending one may be evicted).
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := api.Client.Status().Update(ctx, &p); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
		},
	}
	mustCreate(t, api.Client, pdb)
	// The status kube-controller-manager's disruption controller would
	// write (there is none here; an unobserved budget makes the API server
	// answer 429 with Retry-After, which client-go waits out).
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 0, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
	if err := api.Client.Status().Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	return pdb
}
