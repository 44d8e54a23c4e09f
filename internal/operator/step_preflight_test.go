package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

func TestCanRun(t *testing.T) {
	ready := corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	cpTaint := corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: cpTaint.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}}
	for _, tc := range []struct {
		name string
		node corev1.Node
		want bool
	}{
		{"ready worker", corev1.Node{Status: ready}, true},
		{"control plane, tolerated", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{cpTaint}}, Status: ready}, true},
		{"cordoned", corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}, Status: ready}, false},
		{"not ready", corev1.Node{}, false},
		{"other taint", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}}, Status: ready}, false},
		{"prefer-no-schedule ignored", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}}}, Status: ready}, true},
	} {
		if got := whyNotRun(pod, &tc.node) == ""; got != tc.want {
			t.Errorf("%s: can run %v (%q), want %v", tc.name, got, whyNotRun(pod, &tc.node), tc.want)
		}
	}
	lost := corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
		Reason: "NodeStatusUnknown", LastTransitionTime: metav1.Date(2026, 12, 6, 21, 7, 2, 0, time.UTC)}}}}
	if got, want := whyNotRun(pod, &lost), "Ready Unknown since 2026-12-06T21:07:02Z (NodeStatusUnknown)"; got != want {
		t.Errorf("whyNotRun of a lost node = %q, want %q", got, want)
	}
	pod.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	if whyNotRun(pod, &corev1.Node{Status: ready}) == "" {
		t.Error("a node outside the pod's node selector can run it")
	}
}

// TestRoomForOperatorReadsNodesLive: the cache (Client) still shows the control
// plane schedulable, the API server (APIReader) has it cordoned — as after
// an API-server restart, when the node informer is still in its back-off.
// The check must refuse: the drain would evict the operator with nowhere
// to go (stop 20's CI run, test/e2e TestOperator's preflight case).
func TestRoomForOperatorReadsNodesLive(t *testing.T) {
	ready := corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	self := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "quantykube-system", Name: "op"}, Spec: corev1.PodSpec{NodeName: "w1"}}
	worker := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Status: ready}
	cp := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp1"}, Status: ready}
	cordoned := cp.DeepCopy()
	cordoned.Spec.Unschedulable = true

	stale := fake.NewClientBuilder().WithObjects(self.DeepCopy(), worker.DeepCopy(), cp).Build()
	live := fake.NewClientBuilder().WithObjects(self.DeepCopy(), worker.DeepCopy(), cordoned).Build()
	r := &Reconciler{Client: stale, APIReader: live, PodName: "op", PodNamespace: "quantykube-system"}
	room, err := r.roomForOperator(context.Background(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(room.refusal, "the operator runs on w1") || !strings.Contains(room.refusal, "cp1: cordoned") || room.mayComeBack {
		t.Errorf("roomForOperator = %+v; want a refusal naming cp1 as cordoned (the only other node, cordoned on the API server), not waited for", room)
	}
	n, err := r.getNode(context.Background(), "cp1")
	if err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable {
		t.Error("getNode read the cache: cp1 schedulable; the API server has it cordoned")
	}
}

// TestPreflightWaitsForANodeToComeBack: the operator runs on the node to
// move and the only other node is Ready Unknown (its kubelet's lease lapsed
// across the API server's restart in the store's move, tainted unreachable
// by the node controller). The preflight waits RoomWait from the step's
// start, saying for what, then refuses with how long it waited. A node that
// is cordoned, or would be refused even once Ready, is not waited for.
func TestPreflightWaitsForANodeToComeBack(t *testing.T) {
	now := time.Date(2026, 12, 6, 21, 8, 0, 0, time.UTC)
	cpTaint := corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}
	self := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "quantykube-system", Name: "op"}, Spec: corev1.PodSpec{NodeName: "w1",
		Tolerations: []corev1.Toleration{{Key: cpTaint.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}}
	worker := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	lost := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp1"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{cpTaint, {Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
			Reason: "NodeStatusUnknown", LastTransitionTime: metav1.NewTime(now.Add(-30 * time.Second))}}}}
	gpu := lost.DeepCopy()
	gpu.Spec.Taints = append(gpu.Spec.Taints, corev1.Taint{Key: "gpu", Effect: corev1.TaintEffectNoSchedule})
	cordoned := lost.DeepCopy()
	cordoned.Spec.Unschedulable = true

	for _, tc := range []struct {
		name    string
		cp      *corev1.Node
		started time.Duration // how long ago the preflight began
		want    string        // "wait", or a part of the refusal
	}{
		{"lost, just now", lost, 10 * time.Second, "wait"},
		{"lost, 2m in", lost, 2 * time.Minute, "wait"},
		{"lost, past RoomWait", lost, 4 * time.Minute, "(waited 4m0s for one to turn Ready)"},
		{"lost and tainted against it", gpu, 10 * time.Second, "taint gpu:NoSchedule"},
		{"lost and cordoned", cordoned, 10 * time.Second, "(cp1: cordoned)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithObjects(self.DeepCopy(), worker.DeepCopy(), tc.cp.DeepCopy()).Build()
			r := &Reconciler{Client: c, APIReader: c, PodName: "op", PodNamespace: "quantykube-system", Now: func() time.Time { return now }}
			r.defaults()
			in := &v1.Installation{}
			in.Status.StepStarted = &metav1.Time{Time: now.Add(-tc.started)}
			out, err := r.preflightStep(context.Background(), in, "w1")
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "wait" {
				if out.failed != nil || out.done || !strings.Contains(out.progress, "waiting up to 3m0s for another node to take the operator (cp1: Ready Unknown since") {
					t.Errorf("outcome %+v; want a wait naming cp1 Ready Unknown", out)
				}
				return
			}
			if out.failed == nil || !strings.Contains(out.failed.Error(), "no other node can take it") || !strings.Contains(out.failed.Error(), tc.want) {
				t.Errorf("outcome %+v; want a refusal containing %q", out, tc.want)
			}
		})
	}
}
