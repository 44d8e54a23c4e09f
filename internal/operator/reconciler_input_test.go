package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/internal/version"
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

// testBadSpec: a zero spec.storeTimeout (the CRD's pattern lets it
// through) is refused with one line naming the field and the fix, and
// nothing is touched; once fixed, the run starts.
func testBadSpec(t *testing.T, api *testAPI) {
	w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
	in := defaultInstallation()
	in.Spec.StoreTimeout = &metav1.Duration{}
	mustCreate(t, api.Client, in)
	w.pass(t)
	refused := w.installation(t)
	w.pass(t)
	got := w.installation(t)
	want := "spec.storeTimeout is 0s: a deadline must be positive; set it to a duration such as 15m0s (its default), or remove it"
	d := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionDegraded)
	if d == nil || d.Status != metav1.ConditionTrue || d.Reason != v1.ReasonInvalidSpec || d.Message != want || got.Status.Message != want {
		t.Errorf("Degraded = %+v, message %q; want True, %s, %q", d, got.Status.Message, v1.ReasonInvalidSpec, want)
	}
	if got.Status.Step != "" || len(w.hosts.pods) != 0 || getNode(t, api.Client, "w1").Spec.Unschedulable || got.ResourceVersion != refused.ResourceVersion {
		t.Errorf("something was touched, or the refusal written again: step %q, host pods %v", got.Status.Step, w.hosts.pods)
	}
	patch := []byte(`{"spec":{"storeTimeout":"15m"}}`)
	if err := api.Client.Patch(context.Background(), &v1.Installation{ObjectMeta: metav1.ObjectMeta{Name: v1.Name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	w.pass(t)
	if got := w.installation(t); got.Status.Phase != v1.PhaseMoving || got.Status.Step != v1.StepStore {
		t.Errorf("after the fix: phase %s step %q; want the move started at the store", got.Status.Phase, got.Status.Step)
	}
}

// TestValidateSpec: values the CRD refuses already are refused by the
// operator too (a CRD from an older release, or none), one line each.
func TestValidateSpec(t *testing.T) {
	neg := &metav1.Duration{Duration: -5 * time.Minute}
	for _, tc := range []struct {
		name string
		spec v1.InstallationSpec
		want string
	}{
		{"defaults", v1.InstallationSpec{}, ""},
		{"negative node timeout", v1.InstallationSpec{NodeTimeout: neg}, "spec.nodeTimeout is -5m0s: a deadline must be positive; set it to a duration such as 10m0s (its default), or remove it"},
		{"negative store timeout", v1.InstallationSpec{StoreTimeout: neg}, "spec.storeTimeout is -5m0s: a deadline must be positive; set it to a duration such as 15m0s (its default), or remove it"},
		{"negative retry", v1.InstallationSpec{Retry: -1}, "spec.retry is -1: it counts retries and cannot be negative; set it to 3 to retry"},
	} {
		in := &v1.Installation{Spec: tc.spec, Status: v1.InstallationStatus{ObservedRetry: 2}}
		if got := validateSpec(in); got != tc.want {
			t.Errorf("%s: %q; want %q", tc.name, got, tc.want)
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
	if !in.Spec.Store || in.Spec.Runtime.NodeSelector[v1.RuntimeLabel] != v1.RuntimeLabelValue || in.Spec.NodeTimeout == nil || in.Spec.NodeTimeout.Duration != 10*time.Minute ||
		in.Spec.StoreTimeout == nil || in.Spec.StoreTimeout.Duration != 15*time.Minute || in.Spec.Drain.DeleteEmptyDirData {
		t.Errorf("spec %+v; want store, the runtime label, the 10m and 15m defaults, emptyDir data kept", in.Spec)
	}
}

// testOperatorRecorded: status.operator names the build that runs, and a
// new build (an upgraded operator) is recorded by its first pass.
func testOperatorRecorded(t *testing.T, api *testAPI) {
	defer func(c string) { version.Commit = c }(version.Commit)
	w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
	mustCreate(t, api.Client, defaultInstallation())
	version.Commit = "0123456789ab"
	w.pass(t)
	want := v1.OperatorStatus{Version: version.Version, Commit: "0123456789ab", Image: "quantykube.local/quantykube:dev"}
	if got := w.installation(t).Status.Operator; got == nil || *got != want {
		t.Errorf("status.operator = %+v, want %+v", got, want)
	}
	version.Commit = "ba9876543210"
	w.pass(t)
	want.Commit = "ba9876543210"
	if got := w.installation(t).Status.Operator; got == nil || *got != want {
		t.Errorf("after an upgrade: status.operator = %+v, want %+v", got, want)
	}
}
