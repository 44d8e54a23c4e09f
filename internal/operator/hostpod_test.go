package operator

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/internal/operator/hostrun"
)

func TestReadHostPod(t *testing.T) {
	term := func(msg string, code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "host", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg, ExitCode: code, Reason: "Error"}}}
	}
	done := hostrun.Result{Subject: v1.SubjectStore, Op: v1.OperationInstall, State: hostrun.StateDone, Detail: "API-server downtime: 5s"}
	for _, tc := range []struct {
		name     string
		phase    corev1.PodPhase
		cs       corev1.ContainerStatus
		finished bool
		state    hostrun.State
		reason   string
	}{
		{"running", corev1.PodRunning, corev1.ContainerStatus{}, false, "", ""},
		{"done", corev1.PodSucceeded, term(done.String(), 0), true, hostrun.StateDone, ""},
		{"error text", corev1.PodFailed, term("unit exited without finishing its journal", 1), true, "", "without finishing"},
		{"image missing", corev1.PodPending, corev1.ContainerStatus{Image: "q:dev", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}, true, "", "image q:dev is not on node"},
	} {
		p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "w1"}, Status: corev1.PodStatus{Phase: tc.phase, ContainerStatuses: []corev1.ContainerStatus{tc.cs}}}
		hs := readHostPod(p)
		if hs.finished != tc.finished {
			t.Errorf("%s: finished %v", tc.name, hs.finished)
		}
		if tc.state != "" && (hs.result == nil || hs.result.State != tc.state) {
			t.Errorf("%s: result %+v; want %s", tc.name, hs.result, tc.state)
		}
		if tc.reason != "" && !strings.Contains(hs.reason, tc.reason) {
			t.Errorf("%s: reason %q; want %q", tc.name, hs.reason, tc.reason)
		}
	}
}
