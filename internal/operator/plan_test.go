package operator

import (
	"strings"
	"testing"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

func TestFirstTask(t *testing.T) {
	nodes := func(states ...v1.NodeState) []v1.NodeStatus {
		var out []v1.NodeStatus
		for i, s := range states {
			out = append(out, v1.NodeStatus{Name: string(rune('a' + i)), State: s})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		st    v1.InstallationStatus
		store bool
		undo  bool
		want  task
		ok    bool
	}{
		{"store first", v1.InstallationStatus{Nodes: nodes(v1.NodeStatePending)}, true, false, task{Step: v1.StepStore}, true},
		{"store not asked", v1.InstallationStatus{Nodes: nodes(v1.NodeStatePending)}, false, false, task{Step: v1.StepPreflight, Node: "a"}, true},
		{"next unmoved node", v1.InstallationStatus{Store: v1.PhaseMoved, Nodes: nodes(v1.NodeStateMoved, v1.NodeStatePending)}, true, false, task{Step: v1.StepPreflight, Node: "b"}, true},
		{"failed node is retried", v1.InstallationStatus{Store: v1.PhaseMoved, Nodes: nodes(v1.NodeStateFailed)}, true, false, task{Step: v1.StepPreflight, Node: "a"}, true},
		{"all moved", v1.InstallationStatus{Store: v1.PhaseMoved, Nodes: nodes(v1.NodeStateMoved, v1.NodeStateMoved)}, true, false, task{}, false},
		{"undo: last node first", v1.InstallationStatus{Store: v1.PhaseMoved, Nodes: nodes(v1.NodeStateMoved, v1.NodeStateMoved)}, true, true, task{Step: v1.StepCordon, Node: "b"}, true},
		{"undo: untouched nodes skipped", v1.InstallationStatus{Store: v1.PhaseMoved, Nodes: nodes(v1.NodeStateMoved, v1.NodeStatePending)}, true, true, task{Step: v1.StepCordon, Node: "a"}, true},
		{"undo: store last", v1.InstallationStatus{Store: v1.PhaseMoved, Nodes: nodes(v1.NodeStateUndone)}, true, true, task{Step: v1.StepStore}, true},
		{"undo: a failed store is undone", v1.InstallationStatus{Store: v1.PhaseFailed}, true, true, task{Step: v1.StepStore}, true},
		{"undo: nothing moved", v1.InstallationStatus{Nodes: nodes(v1.NodeStatePending)}, true, true, task{}, false},
	} {
		got, ok := firstTask(&tc.st, tc.store, tc.undo)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %v %v; want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestNextTaskWalksNodeSteps(t *testing.T) {
	st := &v1.InstallationStatus{Store: v1.PhaseMoved, Nodes: []v1.NodeStatus{{Name: "a", State: v1.StepCordon.NodeState()}, {Name: "b", State: v1.NodeStatePending}}}
	cur := task{Step: v1.StepCordon, Node: "a"}
	var seen []string
	for {
		seen = append(seen, string(cur.Step)+"@"+cur.Node)
		if cur.Step == v1.StepUncordon {
			st.Nodes[nodeIndex(st, cur.Node)].State = v1.NodeStateMoved
		}
		next, ok := nextTask(st, true, false, cur)
		if !ok {
			break
		}
		cur = next
	}
	want := "cordon@a drain@a runtime@a wait-ready@a uncordon@a preflight@b cordon@b drain@b runtime@b wait-ready@b uncordon@b"
	if got := strings.Join(seen, " "); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestProgressLine(t *testing.T) {
	in := &v1.Installation{Status: v1.InstallationStatus{
		Phase: v1.PhaseMoving, Store: v1.PhaseMoved, Step: v1.StepDrain, Node: "w1",
		Nodes: []v1.NodeStatus{{Name: "w1"}, {Name: "w2"}},
	}}
	got := progressLine(in, "draining (12 pods left)")
	want := "store moved; node 1 of 2 moving (w1): drain: draining (12 pods left)"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
