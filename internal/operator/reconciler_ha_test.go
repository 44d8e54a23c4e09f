package operator

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/internal/install/hamove"
)

// Scenarios of TestReconcilerRealAPIServer on a control plane of three
// nodes: the store step is the HA move (step_store_ha.go).

var threeCPs = []string{"cp1", "cp2", "cp3"}

// haWant is what fakeHosts.ha records for steps run in direction op.
func haWant(op v1.Operation, steps []hamove.NodeStep) []string {
	var out []string
	for _, s := range steps {
		out = append(out, string(op)+" "+s.Step+"/"+s.Node)
	}
	return out
}

// haPass runs one pass and checks the HA invariant that holds after every
// pass: an HA host pod that exists is the recorded step's, on its node.
func haPass(t *testing.T, w *world) *v1.Installation {
	t.Helper()
	w.pass(t)
	in := w.installation(t)
	var pods corev1.PodList
	if err := w.api.Client.List(context.Background(), &pods, client.InNamespace(Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if !strings.Contains(p.Name, "-ha-") || p.DeletionTimestamp != nil {
			continue
		}
		ha := in.Status.HA
		if ha == nil || ha.Step == "" {
			t.Errorf("host pod %s exists while status.ha records no step (%+v)", p.Name, ha)
			continue
		}
		step, node, _ := strings.Cut(ha.Step, "/")
		if prefix := "qk-" + string(ha.Op) + "-store-ha-" + step + "-" + node + "-"; !strings.HasPrefix(p.Name, prefix) || p.Spec.NodeName != node {
			t.Errorf("host pod %s on %s exists while status.ha records %s %s", p.Name, p.Spec.NodeName, ha.Op, ha.Step)
		}
	}
	return in
}

// haRun runs passes until the phase is want with the step idle, at most max.
func haRun(t *testing.T, w *world, max int, want v1.Phase) *v1.Installation {
	t.Helper()
	var in *v1.Installation
	for i := 0; i < max; i++ {
		in = haPass(t, w)
		if in.Status.Phase == want && (in.Status.Step == v1.StepDone || in.Status.Step == "") {
			return in
		}
	}
	t.Fatalf("after %d passes phase %s step %s (%s); HA steps run %v", max, in.Status.Phase, in.Status.Step, in.Status.Message, w.hosts.ha)
	return nil
}

func testHAMoveAndUndo(t *testing.T, api *testAPI) {
	w := newWorld(t, api, true, threeCPs, nil)
	mustCreate(t, api.Client, defaultInstallation())
	in := haRun(t, w, 80, v1.PhaseMoved)
	if want := haWant(v1.OperationInstall, hamove.Order(threeCPs, false)); !reflect.DeepEqual(w.hosts.ha, want) {
		t.Errorf("HA install steps:\n got %v\nwant %v", w.hosts.ha, want)
	}
	checkGoal(t, in, v1.PhaseMoved)
	if ha := in.Status.HA; ha == nil || ha.InstallDone != 7 || ha.Step != "" || !reflect.DeepEqual(ha.ControlPlanes, threeCPs) {
		t.Errorf("status.ha %+v; want 7 install steps done over %v, none running", ha, threeCPs)
	}
	noHostPods(t, api.Client)

	w.hosts.ha = nil
	patchUndo(t, api.Client, true)
	in = haRun(t, w, 120, v1.PhaseUndone)
	if want := haWant(v1.OperationUndo, hamove.Order(threeCPs, true)); !reflect.DeepEqual(w.hosts.ha, want) {
		t.Errorf("HA undo steps:\n got %v\nwant %v", w.hosts.ha, want)
	}
	checkGoal(t, in, v1.PhaseUndone)
	if in.Status.HA != nil {
		t.Errorf("status.ha %+v after the undo; want none", in.Status.HA)
	}
	noHostPods(t, api.Client)
}

// testHARestart stops the operator mid-way: every pass runs a fresh
// Reconciler (w.pass), so here the check is that the record alone says
// where to go on, with a host pod left running across the restart.
func testHARestart(t *testing.T, api *testAPI) {
	w := newWorld(t, api, true, threeCPs, nil)
	mustCreate(t, api.Client, defaultInstallation())
	var in *v1.Installation
	for i := 0; i < 60; i++ {
		in = haPass(t, w)
		if in.Status.HA != nil && in.Status.HA.Index == 3 {
			break
		}
	}
	if ha := in.Status.HA; ha == nil || ha.Index != 3 || ha.Step != "switch/cp1" || ha.InstallDone != 3 || len(w.hosts.ha) != 3 {
		t.Fatalf("status.ha %+v, steps run %v; want step 3 switch/cp1 recorded after 3 done", in.Status.HA, w.hosts.ha)
	}
	// The host of cp1 is slow: the step's pod is created and keeps
	// running while the operator is "restarted" (the next passes).
	w.hosts.silent["cp1"] = true
	for i := 0; i < 3; i++ {
		in = haPass(t, w)
	}
	if in.Status.HA.Step != "switch/cp1" || in.Status.Attempt != 1 || len(w.hosts.ha) != 3 {
		t.Fatalf("with cp1 slow: status.ha %+v attempt %d, steps run %v; want switch/cp1 followed by its first pod", in.Status.HA, in.Status.Attempt, w.hosts.ha)
	}
	delete(w.hosts.silent, "cp1")
	in = haRun(t, w, 60, v1.PhaseMoved)
	if want := haWant(v1.OperationInstall, hamove.Order(threeCPs, false)); !reflect.DeepEqual(w.hosts.ha, want) {
		t.Errorf("HA install steps across the restart:\n got %v\nwant %v (each once)", w.hosts.ha, want)
	}
	for name, n := range w.hosts.pods {
		if strings.Contains(name, "-ha-switch-cp1-") && !strings.HasSuffix(name, "-1") {
			t.Errorf("host pod %s seen %d times: the restart started another pod instead of following the first", name, n)
		}
	}
	checkGoal(t, in, v1.PhaseMoved)
}

func testHAFailedThenUndo(t *testing.T, api *testAPI) {
	w := newWorld(t, api, true, threeCPs, nil)
	w.hosts.failHA["switch/cp2"] = "restart-apiserver: injected fault"
	mustCreate(t, api.Client, defaultInstallation())
	in := haRun(t, w, 80, v1.PhaseFailed)
	checkFailed(t, in, v1.ReasonStepFailed)
	if !strings.Contains(in.Status.Message, "switch on cp2") || !strings.Contains(in.Status.Message, "injected fault") {
		t.Errorf("message %q; want the HA step, its node and the host's reason", in.Status.Message)
	}
	if in.Status.Store != v1.PhaseFailed || in.Status.HA == nil || in.Status.HA.InstallDone != 4 {
		t.Errorf("store %s, status.ha %+v; want Failed with 4 install steps done", in.Status.Store, in.Status.HA)
	}
	noHostPods(t, api.Client)

	// The undo fails at leave/cp2 once; a move cannot start from there,
	// and the undo, asked again, goes on at the recorded step.
	w.hosts.ha = nil
	w.hosts.failHA["leave/cp2"] = "remove-member: injected fault"
	patchUndo(t, api.Client, true)
	in = haRun(t, w, 80, v1.PhaseFailed)
	if !strings.Contains(in.Status.Message, "leave on cp2") || in.Status.HA == nil || in.Status.HA.Step != "leave/cp2" {
		t.Errorf("undo failure: message %q, status.ha %+v; want failed at leave/cp2", in.Status.Message, in.Status.HA)
	}
	patchUndo(t, api.Client, false)
	in = haRun(t, w, 20, v1.PhaseFailed)
	if !strings.Contains(in.Status.Message, "set spec.undo to true to finish the undo") {
		t.Errorf("a move after a stopped undo: %q; want refused, naming the fix", in.Status.Message)
	}
	patchUndo(t, api.Client, true)
	in = haRun(t, w, 80, v1.PhaseUndone)
	// first/cp1 join/cp2 join/cp3 switch/cp1 were done: cp1's API server
	// goes back to etcd, then the members leave, the first one last.
	want := []string{"undo switch-back/cp1", "undo leave/cp3", "undo leave/cp2", "undo leave/cp1"}
	if !reflect.DeepEqual(w.hosts.ha, want) {
		t.Errorf("HA undo from the middle:\n got %v\nwant %v", w.hosts.ha, want)
	}
	checkGoal(t, in, v1.PhaseUndone)
	noHostPods(t, api.Client)
}

// testHAControlPlaneRuntime: control planes selected for the runtime are
// moved by the node loop as any node is: after the store step has ended
// (its HA sequence never mid-way while a node step runs), one node at a
// time; undoing, the nodes come back before the store's undo begins.
func testHAControlPlaneRuntime(t *testing.T, api *testAPI) {
	w := newWorld(t, api, true, threeCPs, nil)
	for _, n := range []string{"cp1", "cp2"} {
		node := getNode(t, api.Client, n)
		node.Labels[v1.RuntimeLabel] = v1.RuntimeLabelValue
		if err := api.Client.Update(t.Context(), node); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(t, api.Client, defaultInstallation())
	check := func(in *v1.Installation) {
		t.Helper()
		busy := 0
		for _, n := range in.Status.Nodes {
			if n.State != v1.NodeStatePending && n.State != v1.NodeStateMoved && n.State != v1.NodeStateUndone {
				busy++
			}
		}
		if busy > 1 {
			t.Errorf("%d nodes mid-way at once: %+v", busy, in.Status.Nodes)
		}
		if in.Status.Node != "" && in.Status.HA != nil && in.Status.HA.Step != "" {
			t.Errorf("node step %s on %s while the HA move stands at %s", in.Status.Step, in.Status.Node, in.Status.HA.Step)
		}
	}
	var in *v1.Installation
	for i := 0; i < 120; i++ {
		in = haPass(t, w)
		check(in)
		if in.Status.Phase == v1.PhaseMoved {
			break
		}
	}
	checkGoal(t, in, v1.PhaseMoved)
	patchUndo(t, api.Client, true)
	for i := 0; i < 160; i++ {
		in = haPass(t, w)
		check(in)
		if in.Status.Phase == v1.PhaseUndone {
			break
		}
	}
	checkGoal(t, in, v1.PhaseUndone)
}
