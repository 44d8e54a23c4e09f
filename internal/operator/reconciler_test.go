package operator

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// TestReconcilerRealAPIServer runs the reconciler against a real
// kube-apiserver and etcd. Every pass uses a fresh Reconciler, so each
// scenario also shows that an operator restarted before any pass resumes
// from status alone. The scenarios share the API server and run in order;
// each starts from a reset world.
func TestReconcilerRealAPIServer(t *testing.T) {
	api := startTestAPI(t)
	for _, sc := range []struct {
		name string
		run  func(*testing.T, *testAPI)
	}{
		{"move and undo", testMoveAndUndo},
		{"a node cordoned before stays cordoned", testCordonedBefore},
		{"a runtime that rolls back fails the installation", testRuntimeRollsBack},
		{"a node that hangs fails within its deadline", testNodeHangs},
		{"a node cordoned before stays cordoned after its rollback", testCordonedBeforeStaysCordoned},
		{"a node whose preflight refuses fails untouched", testPreflightRefuses},
		{"a PodDisruptionBudget that blocks the drain fails at the deadline", testBudgetBlocksDrain},
		{"emptyDir data: refused before the cordon, then allowed by spec.drain", testEmptyDirRefused},
		{"spec.retry resumes a failed run at the step that failed", testRetryResumesAtFailedStep},
		{"a spec.retry value is acted on once", testRetryActsOnce},
		{"the store step past spec.storeTimeout fails and is rolled back", testStoreDeadline},
		{"three control planes: the store step past spec.storeTimeout fails where it stands", testHAStoreDeadlineFails},
		{"bad input touches nothing", testBadInput},
		{"a spec value that cannot be acted on touches nothing", testBadSpec},
		{"three control planes: the HA move and its undo", testHAMoveAndUndo},
		{"three control planes: a restarted operator goes on at the recorded HA step", testHARestart},
		{"three control planes: a failed HA step fails, undo from the middle", testHAFailedThenUndo},
		{"three control planes: runtime moves of control planes after the store, one at a time", testHAControlPlaneRuntime},
		{"only the Installation named quantykube", testOnlyOneName},
		{"the operator creates the Installation when absent", testEnsureInstallation},
		{"status.operator names the build that runs", testOperatorRecorded},
	} {
		t.Run(sc.name, func(t *testing.T) { sc.run(t, api) })
	}
}

func testMoveAndUndo(t *testing.T, api *testAPI) {
	w := newWorld(t, api, true, []string{"cp1"}, []string{"w1", "w2"})
	mustCreate(t, api.Client, defaultInstallation())
	steps, in := w.runUntil(t, 80, v1.PhaseMoved)
	want := []string{"store@"}
	for _, n := range []string{"w1", "w2"} {
		for _, s := range nodeSteps {
			want = append(want, string(s)+"@"+n)
		}
	}
	if !reflect.DeepEqual(steps, want) {
		t.Errorf("steps:\n got %v\nwant %v", steps, want)
	}
	checkGoal(t, in, v1.PhaseMoved)
	for _, n := range []string{"w1", "w2"} {
		if node := getNode(t, api.Client, n); node.Spec.Unschedulable || node.Status.NodeInfo.ContainerRuntimeVersion != "quantykube://0.1.0" {
			t.Errorf("node %s: unschedulable=%v runtime=%s; want schedulable on quantykube", n, node.Spec.Unschedulable, node.Status.NodeInfo.ContainerRuntimeVersion)
		}
	}
	noHostPods(t, api.Client)
	var apps corev1.PodList
	if err := api.Client.List(context.Background(), &apps, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	if len(apps.Items) != 0 {
		t.Errorf("%d workload pods left on drained nodes", len(apps.Items))
	}

	// The undo patch: nodes in reverse order, then the store.
	patchUndo(t, api.Client, true)
	steps, in = w.runUntil(t, 80, v1.PhaseUndone)
	want = nil
	for _, n := range []string{"w2", "w1"} {
		for _, s := range nodeSteps[1:] { // no preflight when undoing
			want = append(want, string(s)+"@"+n)
		}
	}
	want = append(want, "store@")
	if !reflect.DeepEqual(steps, want) {
		t.Errorf("undo steps:\n got %v\nwant %v", steps, want)
	}
	checkGoal(t, in, v1.PhaseUndone)
	if w.hosts.installed["store/cp1"] || w.hosts.installed["runtime/w1"] {
		t.Errorf("hosts still installed after undo: %v", w.hosts.installed)
	}
	noHostPods(t, api.Client)
}

func testCordonedBefore(t *testing.T, api *testAPI) {
	w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
	n := getNode(t, api.Client, "w1")
	n.Spec.Unschedulable = true
	if err := api.Client.Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, api.Client, defaultInstallation())
	_, in := w.runUntil(t, 60, v1.PhaseMoved)
	if ns := in.Status.Nodes[0]; !ns.WasCordoned || !ns.CordonRecorded {
		t.Errorf("status does not record that w1 was cordoned before: %+v", ns)
	}
	if !getNode(t, api.Client, "w1").Spec.Unschedulable {
		t.Errorf("w1 was uncordoned although it was cordoned before the move")
	}
}

// defaultInstallation is the Installation the scenarios apply. It allows
// the drain to delete emptyDir data: every worker of the fake world runs a
// pod with an emptyDir volume (its -app-b pod); testEmptyDirRefused asks
// without it.
func defaultInstallation() *v1.Installation {
	return &v1.Installation{
		ObjectMeta: metav1.ObjectMeta{Name: v1.Name},
		Spec: v1.InstallationSpec{Store: true,
			Runtime: v1.RuntimeSpec{NodeSelector: map[string]string{v1.RuntimeLabel: v1.RuntimeLabelValue}},
			Drain:   v1.DrainSpec{DeleteEmptyDirData: true}},
	}
}

// checkGoal checks a finished run: the phase, each condition at the spec's
// generation with its own reason, every node and the store in the goal, no
// step's host pod or journal check left recorded.
func checkGoal(t *testing.T, in *v1.Installation, phase v1.Phase) {
	t.Helper()
	if in.Status.Phase != phase {
		t.Errorf("phase %s; want %s", in.Status.Phase, phase)
	}
	for _, want := range []struct {
		typ    string
		status metav1.ConditionStatus
		reason string
	}{
		{v1.ConditionReady, metav1.ConditionTrue, v1.ReasonGoalReached},
		{v1.ConditionProgressing, metav1.ConditionFalse, v1.ReasonIdle},
		{v1.ConditionDegraded, metav1.ConditionFalse, v1.ReasonAsExpected},
	} {
		c := meta.FindStatusCondition(in.Status.Conditions, want.typ)
		if c == nil || c.Status != want.status || c.Reason != want.reason || c.ObservedGeneration != in.Generation || c.Message == "" {
			t.Errorf("condition %s = %+v; want %s, reason %s, a message, at generation %d", want.typ, c, want.status, want.reason, in.Generation)
		}
	}
	goal := map[v1.Phase]v1.NodeState{v1.PhaseMoved: v1.NodeStateMoved, v1.PhaseUndone: v1.NodeStateUndone}[phase]
	for _, n := range in.Status.Nodes {
		if n.State != goal || n.Start == nil || n.End == nil {
			t.Errorf("node %+v; want %s with start and end", n, goal)
		}
	}
	if in.Status.Store != phase {
		t.Errorf("store %q; want %s", in.Status.Store, phase)
	}
	if in.Status.Attempt != 0 || in.Status.JournalCheck != 0 {
		t.Errorf("attempt %d, journalCheck %d after the run; want 0, 0", in.Status.Attempt, in.Status.JournalCheck)
	}
}

func patchUndo(t *testing.T, c client.Client, undo bool) {
	t.Helper()
	in := &v1.Installation{ObjectMeta: metav1.ObjectMeta{Name: v1.Name}}
	p := []byte(`{"spec":{"undo":false}}`)
	if undo {
		p = []byte(`{"spec":{"undo":true}}`)
	}
	if err := c.Patch(context.Background(), in, client.RawPatch(types.MergePatchType, p)); err != nil {
		t.Fatalf("patch undo=%v: %v", undo, err)
	}
}

func getNode(t *testing.T, c client.Client, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: name}, n); err != nil {
		t.Fatalf("get node %s: %v", name, err)
	}
	return n
}

func noHostPods(t *testing.T, c client.Client) {
	t.Helper()
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods, client.InNamespace(Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("%d host pods left behind", len(pods.Items))
	}
}
