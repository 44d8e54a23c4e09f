package operator

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// TestPlanDrain: the plan is kubectl's — mirror pods and the operator's own
// host pods stay, a pod without a controller refuses the drain — and a pod
// with emptyDir data is evicted only with spec.drain.deleteEmptyDirData.
func TestPlanDrain(t *testing.T) {
	owned := func(name string, emptyDir bool) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: ptrTrue()}}},
			Spec: corev1.PodSpec{NodeName: "w1"},
		}
		if emptyDir {
			p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}
		return p
	}
	host := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "qk-install-runtime-preflight-w1-1", UID: "host",
		Labels: map[string]string{LabelManagedBy: ManagedBy}}, Spec: corev1.PodSpec{NodeName: "w1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-w1", UID: "mirror",
		Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}}, Spec: corev1.PodSpec{NodeName: "w1"}}
	plan := func(t *testing.T, allow bool, objs ...runtime.Object) drainPlan {
		t.Helper()
		r := &Reconciler{Kube: kubefake.NewSimpleClientset(objs...)}
		r.defaults()
		in := &v1.Installation{Spec: v1.InstallationSpec{Drain: v1.DrainSpec{DeleteEmptyDirData: allow}}}
		p, err := r.planDrain(context.Background(), in, "w1")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	objs := []runtime.Object{owned("a", false), owned("b", true), host, mirror}

	p := plan(t, false, objs...)
	want := "node w1 runs pods with emptyDir data that the drain would delete: default/b; set spec.drain.deleteEmptyDirData to true to allow it"
	if p.refusal == nil || !strings.HasPrefix(p.refusal.Error(), want) {
		t.Errorf("without the field: refusal %v; want %q", p.refusal, want)
	}
	p = plan(t, true, objs...)
	if p.refusal != nil || len(p.pods) != 2 || len(p.emptyDir) != 1 || p.emptyDir[0] != "default/b" {
		t.Errorf("with the field: refusal %v, %d pods, emptyDir %v; want a and b evicted, b's data deleted", p.refusal, len(p.pods), p.emptyDir)
	}
	if got, want := p.impact(), "the drain of w1 evicts 2 pods: default/a, default/b; it deletes the emptyDir data of default/b (spec.drain.deleteEmptyDirData)"; got != want {
		t.Errorf("impact %q; want %q", got, want)
	}
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bare", UID: "bare"}, Spec: corev1.PodSpec{NodeName: "w1"}}
	if p := plan(t, true, owned("a", false), bare); p.refusal == nil || !strings.Contains(p.refusal.Error(), "default/bare") {
		t.Errorf("a pod without a controller: refusal %v; want kubectl's, naming it", p.refusal)
	}
}
