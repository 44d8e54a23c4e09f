package operator

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// Scenarios of TestReconcilerRealAPIServer about the drain (drain_plan.go).

// testEmptyDirRefused: w1 runs a pod with an emptyDir volume (w1-app-b).
// Without spec.drain.deleteEmptyDirData the node is refused in its
// preflight with one line naming the pod and the field, and nothing on it
// changes; with the field set, the same Installation goes on, and the
// preflight's Event names the pods to be evicted and the emptyDir data
// deleted, before the drain starts.
func testEmptyDirRefused(t *testing.T, api *testAPI) {
	w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
	in := defaultInstallation()
	in.Spec.Drain.DeleteEmptyDirData = false
	mustCreate(t, api.Client, in)
	_, got := w.runUntil(t, 40, v1.PhaseFailed)
	want := "node w1 runs pods with emptyDir data that the drain would delete: default/w1-app-b; set spec.drain.deleteEmptyDirData to true to allow it"
	if !strings.Contains(got.Status.Message, "node w1: preflight failed: "+want) || strings.Contains(got.Status.Message, "\n") {
		t.Errorf("message %q; want one line: the preflight refused with %q", got.Status.Message, want)
	}
	if f := got.Status.Failed; f == nil || f.Step != v1.StepPreflight || f.RetryStep != v1.StepPreflight {
		t.Errorf("status.failed = %+v; want the preflight failed, retried from there", f)
	}
	if n := getNode(t, api.Client, "w1"); n.Spec.Unschedulable || got.Status.Nodes[0].CordonRecorded || w.hosts.installed["runtime/w1"] {
		t.Errorf("after the refusal: w1 cordoned %v, cordon recorded %v, runtime installed %v; want nothing changed",
			n.Spec.Unschedulable, got.Status.Nodes[0].CordonRecorded, w.hosts.installed["runtime/w1"])
	}
	if pods := podsOn(t, api.Client, "w1"); len(pods) != 3 {
		t.Errorf("pods on w1 after the refusal: %v; want its 3 pods untouched", pods)
	}
	noHostPods(t, api.Client)

	w.events = nil
	patch := []byte(`{"spec":{"drain":{"deleteEmptyDirData":true}}}`)
	if err := api.Client.Patch(context.Background(), &v1.Installation{ObjectMeta: metav1.ObjectMeta{Name: v1.Name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	_, got = w.runUntil(t, 60, v1.PhaseMoved)
	checkGoal(t, got, v1.PhaseMoved)
	impact := "Normal StepDone node w1: preflight done: the drain of w1 evicts 3 pods: default/w1-app-a, default/w1-app-b, default/w1-app-c; it deletes the emptyDir data of default/w1-app-b"
	said := slices.IndexFunc(w.events, func(e string) bool { return strings.HasPrefix(e, impact) })
	drained := slices.Index(w.events, "Normal StepStarted node w1: drain")
	if said < 0 || drained < 0 || said > drained {
		t.Errorf("events %q; want %q before the drain started", w.events, impact)
	}
	if pods := podsOn(t, api.Client, "w1"); len(pods) != 0 {
		t.Errorf("pods on w1 after the move: %v; want them evicted", pods)
	}
}

// podsOn names the workload pods (namespace default) bound to node.
func podsOn(t *testing.T, c client.Client, node string) []string {
	t.Helper()
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == node {
			out = append(out, p.Name)
		}
	}
	return out
}
