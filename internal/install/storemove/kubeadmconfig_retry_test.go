package storemove

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func kubeadmConfigMap(text string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: kubeadmConfigNamespace, Name: kubeadmConfigName},
		Data: map[string]string{clusterConfigKey: text}}
}

// failing makes the first n calls of verb on ConfigMaps fail with err.
func failing(cs *fake.Clientset, verb string, n int, err error) *int {
	calls := 0
	cs.PrependReactor(verb, "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls <= n {
			return true, nil, err
		}
		return false, nil, nil
	})
	return &calls
}

// TestClusterConfigWriteRetriesTransientErrors: a 503 on the update and a
// timeout on the read (an API server behind the load balancer restarting,
// its storage changing leader) are retried; the write lands once.
func TestClusterConfigWriteRetriesTransientErrors(t *testing.T) {
	cs := fake.NewSimpleClientset(kubeadmConfigMap("a"))
	updates := failing(cs, "update", 2, apierrors.NewServiceUnavailable("etcdserver: leader changed"))
	gets := failing(cs, "get", 1, apierrors.NewTimeoutError("request timed out", 1))
	err := writeClusterConfig(context.Background(), cs, func(cur []byte) ([]byte, error) { return append(cur, 'b'), nil })
	if err != nil {
		t.Fatalf("writeClusterConfig after 2 unavailable updates: %v", err)
	}
	cfg, err := readClusterConfig(context.Background(), cs)
	if err != nil || string(cfg) != "ab" {
		t.Fatalf("ClusterConfiguration %q (%v), want %q: the change applied once", cfg, err, "ab")
	}
	if *updates != 3 || *gets < 2 {
		t.Errorf("%d updates and %d reads, want 3 updates (2 refused) and a read again after the timeout", *updates, *gets)
	}
}

// TestClusterConfigWriteStopsOnPermanentErrors: a refusal that a retry
// cannot change (forbidden) ends the write at once, with its cause.
func TestClusterConfigWriteStopsOnPermanentErrors(t *testing.T) {
	cs := fake.NewSimpleClientset(kubeadmConfigMap("a"))
	updates := failing(cs, "update", 100, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, kubeadmConfigName, errors.New("no")))
	err := writeClusterConfig(context.Background(), cs, func(cur []byte) ([]byte, error) { return append(cur, 'b'), nil })
	if err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("writeClusterConfig refused: %v, want the forbidden error", err)
	}
	if *updates != 1 {
		t.Errorf("%d updates, want 1 (no retry of a forbidden update)", *updates)
	}
}
