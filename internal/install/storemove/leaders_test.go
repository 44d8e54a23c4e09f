package storemove

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func lease(name, rv string, renewed time.Time) *coordinationv1.Lease {
	holder := name + "_1"
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, ResourceVersion: rv},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &metav1.MicroTime{Time: renewed}},
	}
}

// renew writes the Lease again (a new resourceVersion), as its leader does.
func renew(t *testing.T, cs *fake.Clientset, name, rv string) {
	t.Helper()
	if _, err := cs.CoordinationV1().Leases("kube-system").Update(context.Background(), lease(name, rv, time.Now()), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestWaitLeadersUntilBothRenew(t *testing.T) {
	cs := fake.NewSimpleClientset(lease("kube-controller-manager", "10", time.Now()), lease("kube-scheduler", "11", time.Now()))
	go func() {
		time.Sleep(3 * leadersPoll)
		renew(t, cs, "kube-scheduler", "12")
		time.Sleep(3 * leadersPoll)
		renew(t, cs, "kube-controller-manager", "13")
	}()
	var out bytes.Buffer
	start := time.Now()
	if err := waitLeaders(context.Background(), cs, &out, time.Minute); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 6*leadersPoll {
		t.Fatalf("returned after %v, before kube-controller-manager renewed its Lease", took)
	}
	for _, want := range []string{"kube-controller-manager leads again", "kube-scheduler leads again"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestWaitLeadersSkipsMissingAndStaleLeases(t *testing.T) {
	cs := fake.NewSimpleClientset(lease("kube-scheduler", "5", time.Now().Add(-time.Hour)))
	var out bytes.Buffer
	if err := waitLeaders(context.Background(), cs, &out, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kube-controller-manager has no leader Lease", "kube-scheduler's leader Lease was last renewed 1h0m0s ago"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestWaitLeadersNamesTheOneThatDoesNotReturn(t *testing.T) {
	cs := fake.NewSimpleClientset(lease("kube-controller-manager", "10", time.Now()), lease("kube-scheduler", "11", time.Now()))
	go func() {
		time.Sleep(2 * leadersPoll)
		renew(t, cs, "kube-controller-manager", "12")
	}()
	err := waitLeaders(context.Background(), cs, &bytes.Buffer{}, 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "kube-scheduler has not renewed its Lease kube-system/kube-scheduler") || !strings.Contains(err.Error(), "rerun") {
		t.Fatalf("want an error naming kube-scheduler and the fix, got %v", err)
	}
}
