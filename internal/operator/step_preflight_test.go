package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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

// TestNowhereToGoReadsNodesLive: the cache (Client) still shows the control
// plane schedulable, the API server (APIReader) has it cordoned — as after
// an API-server restart, when the node informer is still in its back-off.
// The check must refuse: the drain would evict the operator with nowhere
// to go (stop 20's CI run, test/e2e TestOperator's preflight case).
func TestNowhereToGoReadsNodesLive(t *testing.T) {
	ready := corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	self := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "quantykube-system", Name: "op"}, Spec: corev1.PodSpec{NodeName: "w1"}}
	worker := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Status: ready}
	cp := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp1"}, Status: ready}
	cordoned := cp.DeepCopy()
	cordoned.Spec.Unschedulable = true

	stale := fake.NewClientBuilder().WithObjects(self.DeepCopy(), worker.DeepCopy(), cp).Build()
	live := fake.NewClientBuilder().WithObjects(self.DeepCopy(), worker.DeepCopy(), cordoned).Build()
	r := &Reconciler{Client: stale, APIReader: live, PodName: "op", PodNamespace: "quantykube-system"}
	why, err := r.nowhereToGo(context.Background(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(why, "the operator runs on w1") || !strings.Contains(why, "cp1: cordoned") {
		t.Errorf("nowhereToGo = %q; want a refusal naming cp1 as cordoned (the only other node, cordoned on the API server)", why)
	}
	n, err := r.getNode(context.Background(), "cp1")
	if err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable {
		t.Error("getNode read the cache: cp1 schedulable; the API server has it cordoned")
	}
}
