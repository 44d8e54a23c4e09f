package operator

import (
	"context"
	"reflect"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// TestReconcilerRealAPIServer runs the reconciler against a real
// kube-apiserver and etcd. Every pass uses a fresh Reconciler, so each
// scenario also shows that an operator restarted before any pass resumes
// from status alone.
func TestReconcilerRealAPIServer(t *testing.T) {
	api := startTestAPI(t)
	ctx := context.Background()

	t.Run("move and undo", func(t *testing.T) {
		w := newWorld(t, api, true, []string{"cp1"}, []string{"w1", "w2"})
		mustCreate(t, api.Client, defaultInstallation())
		steps, in := w.runUntil(t, 80, v1.PhaseMoved)
		want := []string{"store@"}
		for _, n := range []string{"w1", "w2"} {
			for _, s := range nodeSteps {
				want = append(want, s+"@"+n)
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
		_ = api.Client.List(ctx, &apps, client.InNamespace("default"))
		if len(apps.Items) != 0 {
			t.Errorf("%d workload pods left on drained nodes", len(apps.Items))
		}

		// The undo patch: nodes in reverse order, then the store.
		patchUndo(t, api.Client, true)
		steps, in = w.runUntil(t, 80, v1.PhaseUndone)
		want = nil
		for _, n := range []string{"w2", "w1"} {
			for _, s := range nodeSteps[1:] { // no preflight when undoing
				want = append(want, s+"@"+n)
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
	})

	t.Run("a node cordoned before stays cordoned", func(t *testing.T) {
		w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
		n := getNode(t, api.Client, "w1")
		n.Spec.Unschedulable = true
		if err := api.Client.Update(ctx, n); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, api.Client, defaultInstallation())
		_, in := w.runUntil(t, 60, v1.PhaseMoved)
		if !in.Status.Nodes[0].WasCordoned {
			t.Errorf("status does not record that w1 was cordoned before")
		}
		if !getNode(t, api.Client, "w1").Spec.Unschedulable {
			t.Errorf("w1 was uncordoned although it was cordoned before the move")
		}
	})

	t.Run("a runtime that rolls back fails the installation", func(t *testing.T) {
		w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
		w.hosts.rollBack["w1"] = true
		mustCreate(t, api.Client, defaultInstallation())
		_, in := w.runUntil(t, 60, v1.PhaseFailed)
		if in.Status.Store != string(v1.PhaseMoved) {
			t.Errorf("store %q; want Moved (untouched by the node's failure)", in.Status.Store)
		}
		if ns := in.Status.Nodes[0]; ns.State != string(v1.PhaseFailed) || !strings.Contains(ns.Message, "injected fault") || ns.End == nil {
			t.Errorf("node status %+v; want Failed with the host's reason and an end time", ns)
		}
		degraded := meta.FindStatusCondition(in.Status.Conditions, v1.ConditionDegraded)
		if degraded == nil || degraded.Status != metav1.ConditionTrue || !strings.Contains(degraded.Message, "spec.undo") {
			t.Errorf("Degraded = %+v; want True saying what to do", degraded)
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
	})

	t.Run("a node that hangs fails within its deadline", func(t *testing.T) {
		w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
		w.hosts.silent["w1"] = true
		in := defaultInstallation()
		in.Spec.NodeTimeout = &metav1.Duration{Duration: 8 * time.Second}
		mustCreate(t, api.Client, in)
		start := time.Now()
		var got *v1.Installation
		for i := 0; i < 60; i++ {
			w.pass(t)
			got = w.installation(t)
			if got.Status.Phase == v1.PhaseFailed {
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
		if got.Status.Phase != v1.PhaseFailed || !strings.Contains(got.Status.Message, "node w1: runtime failed: node w1 did not finish within 8s") {
			t.Fatalf("phase %s (%s); want Failed in the runtime step for the deadline", got.Status.Phase, got.Status.Message)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("took %v to notice an 8 s deadline", took)
		}
		// Failed at once, and the node's own undo runs: until it ends the
		// node stays cordoned; the store stays moved.
		if got.Status.Step != v1.StepRollback || !getNode(t, api.Client, "w1").Spec.Unschedulable || got.Status.Store != string(v1.PhaseMoved) {
			t.Errorf("after the deadline: step %q, w1 schedulable=%v, store %q; want rollback, cordoned, Moved",
				got.Status.Step, !getNode(t, api.Client, "w1").Spec.Unschedulable, got.Status.Store)
		}
		// The host answers again: undo runtime runs there, the node is Ready
		// on its old runtime, still cordoned; the Installation stays Failed.
		w.hosts.silent["w1"] = false
		for i := 0; i < 60 && got.Status.Step != ""; i++ {
			w.pass(t)
			got = w.installation(t)
			time.Sleep(100 * time.Millisecond)
		}
		if got.Status.Phase != v1.PhaseFailed || got.Status.Step != "" || !strings.Contains(got.Status.Message, "rolled back: Ready on containerd://") {
			t.Fatalf("after the rollback: phase %s, step %q (%s); want Failed, rolled back", got.Status.Phase, got.Status.Step, got.Status.Message)
		}
		if !getNode(t, api.Client, "w1").Spec.Unschedulable || got.Status.Nodes[0].State != string(v1.PhaseFailed) || w.hosts.pods["qk-undo-runtime-run-w1-1"] == 0 {
			t.Errorf("after the rollback: w1 schedulable, node state %q, undo pods %v", got.Status.Nodes[0].State, w.hosts.pods)
		}
	})

	t.Run("a node whose preflight refuses fails untouched", func(t *testing.T) {
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
	})

	t.Run("a PodDisruptionBudget that blocks the drain fails at the deadline", func(t *testing.T) {
		w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
		// The pods carry no labels; give one a label and a budget that allows
		// no disruption.
		var p corev1.Pod
		if err := api.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "w1-app-a"}, &p); err != nil {
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
		defer func() { _ = api.Client.Delete(ctx, pdb) }()
		// The status kube-controller-manager's disruption controller would
		// write (there is none here; an unobserved budget makes the API
		// server answer 429 with Retry-After, which client-go waits out).
		pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 0, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
		if err := api.Client.Status().Update(ctx, pdb); err != nil {
			t.Fatal(err)
		}
		in := defaultInstallation()
		in.Spec.NodeTimeout = &metav1.Duration{Duration: 8 * time.Second}
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
	})

	t.Run("bad input touches nothing", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			kubeadm bool
			cps     []string
			want    string
		}{
			{"not kubeadm", false, []string{"cp1"}, "not made by kubeadm"},
			{"two control planes", true, []string{"cp1", "cp2"}, "2 control-plane nodes"},
		} {
			w := newWorld(t, api, tc.kubeadm, tc.cps, []string{"w1"})
			mustCreate(t, api.Client, defaultInstallation())
			for i := 0; i < 3; i++ {
				w.pass(t)
			}
			in := w.installation(t)
			d := meta.FindStatusCondition(in.Status.Conditions, v1.ConditionDegraded)
			if d == nil || d.Status != metav1.ConditionTrue || !strings.Contains(d.Message, tc.want) {
				t.Errorf("%s: Degraded = %+v; want True with %q", tc.name, d, tc.want)
			}
			if in.Status.Step != "" || len(w.hosts.pods) != 0 || getNode(t, api.Client, "w1").Spec.Unschedulable {
				t.Errorf("%s: something was touched: step %q, host pods %v", tc.name, in.Status.Step, w.hosts.pods)
			}
		}
	})

	t.Run("only the Installation named quantykube", func(t *testing.T) {
		newWorld(t, api, true, []string{"cp1"}, nil)
		other := defaultInstallation()
		other.Name = "second"
		err := api.Client.Create(ctx, other)
		if err == nil || !strings.Contains(err.Error(), "must be named quantykube") {
			t.Errorf("creating a second Installation: %v; want refused by name", err)
		}
	})

	t.Run("the operator creates the Installation when absent", func(t *testing.T) {
		newWorld(t, api, true, []string{"cp1"}, nil)
		if err := EnsureInstallation(ctx, api.Client); err != nil {
			t.Fatal(err)
		}
		if err := EnsureInstallation(ctx, api.Client); err != nil {
			t.Fatalf("second call: %v", err)
		}
		in := &v1.Installation{}
		if err := api.Client.Get(ctx, types.NamespacedName{Name: v1.Name}, in); err != nil {
			t.Fatal(err)
		}
		if !in.Spec.Store || in.Spec.Runtime.NodeSelector[v1.RuntimeLabel] != v1.RuntimeLabelValue || in.Spec.NodeTimeout == nil || in.Spec.NodeTimeout.Duration != 10*time.Minute {
			t.Errorf("spec %+v; want store, the runtime label and the 10m default", in.Spec)
		}
	})
}

func defaultInstallation() *v1.Installation {
	return &v1.Installation{
		ObjectMeta: metav1.ObjectMeta{Name: v1.Name},
		Spec: v1.InstallationSpec{Store: true,
			Runtime: v1.RuntimeSpec{NodeSelector: map[string]string{v1.RuntimeLabel: v1.RuntimeLabelValue}}},
	}
}

func checkGoal(t *testing.T, in *v1.Installation, phase v1.Phase) {
	t.Helper()
	if in.Status.Phase != phase {
		t.Errorf("phase %s; want %s", in.Status.Phase, phase)
	}
	for _, ct := range []string{v1.ConditionReady, v1.ConditionProgressing, v1.ConditionDegraded} {
		c := meta.FindStatusCondition(in.Status.Conditions, ct)
		want := metav1.ConditionFalse
		if ct == v1.ConditionReady {
			want = metav1.ConditionTrue
		}
		if c == nil || c.Status != want || c.ObservedGeneration != in.Generation {
			t.Errorf("condition %s = %+v; want %s at generation %d", ct, c, want, in.Generation)
		}
	}
	for _, n := range in.Status.Nodes {
		if n.State != string(phase) || n.Start == nil || n.End == nil {
			t.Errorf("node %+v; want %s with start and end", n, phase)
		}
	}
	if in.Status.Store != string(phase) {
		t.Errorf("store %q; want %s", in.Status.Store, phase)
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
	_ = c.List(context.Background(), &pods, client.InNamespace(Namespace))
	if len(pods.Items) != 0 {
		t.Errorf("%d host pods left behind", len(pods.Items))
	}
}
