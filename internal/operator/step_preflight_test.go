package operator

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
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
		if got := canRun(pod, &tc.node); got != tc.want {
			t.Errorf("%s: canRun %v, want %v", tc.name, got, tc.want)
		}
	}
	pod.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	if canRun(pod, &corev1.Node{Status: ready}) {
		t.Error("a node outside the pod's node selector can run it")
	}
}
