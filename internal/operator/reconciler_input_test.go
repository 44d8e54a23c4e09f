package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// Scenarios of TestReconcilerRealAPIServer about what the operator is given.

func testBadInput(t *testing.T, api *testAPI) {
	for _, tc := range []struct {
		name    string
		kubeadm bool
		cps     []string
		want    string
	}{
		{"not kubeadm", false, []string{"cp1"}, "not made by kubeadm"},
		{"two control planes", true, []string{"cp1", "cp2"}, "2 control-plane nodes (cp1, cp2): the store's HA move needs an odd number"},
		{"four control planes", true, []string{"cp1", "cp2", "cp3", "cp4"}, "4 control-plane nodes"},
	} {
		w := newWorld(t, api, tc.kubeadm, tc.cps, []string{"w1"})
		mustCreate(t, api.Client, defaultInstallation())
		w.pass(t)
		refused := w.installation(t)
		for i := 0; i < 2; i++ {
			w.pass(t)
		}
		in := w.installation(t)
		d := meta.FindStatusCondition(in.Status.Conditions, v1.ConditionDegraded)
		if d == nil || d.Status != metav1.ConditionTrue || d.Reason != v1.ReasonUnsupported || !strings.Contains(d.Message, tc.want) {
			t.Errorf("%s: Degraded = %+v; want True, %s, with %q", tc.name, d, v1.ReasonUnsupported, tc.want)
		}
		if in.Status.Step != "" || len(w.hosts.pods) != 0 || getNode(t, api.Client, "w1").Spec.Unschedulable {
			t.Errorf("%s: something was touched: step %q, host pods %v", tc.name, in.Status.Step, w.hosts.pods)
		}
		if in.ResourceVersion != refused.ResourceVersion {
			t.Errorf("%s: the refusal was written again by later passes", tc.name)
		}
	}
}

func testOnlyOneName(t *testing.T, api *testAPI) {
	newWorld(t, api, true, []string{"cp1"}, nil)
	other := defaultInstallation()
	other.Name = "second"
	err := api.Client.Create(context.Background(), other)
	if err == nil || !strings.Contains(err.Error(), "must be named quantykube") {
		t.Errorf("creating a second Installation: %v; want refused by name", err)
	}
}

func testEnsureInstallation(t *testing.T, api *testAPI) {
	ctx := context.Background()
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
}
