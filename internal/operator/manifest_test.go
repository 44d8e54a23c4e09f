package operator

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// TestManifestRBACIsEnough applies deploy/quantykube.yaml to a real API
// server, then runs a move and its undo as the operator's service account
// (impersonated): the generated RBAC is enough, and the manifest applies.
func TestManifestRBACIsEnough(t *testing.T) {
	api := startTestAPI(t)
	ctx := context.Background()
	resetWorld(t, api.Client)
	applyManifest(t, api.Client, "../../deploy/quantykube.yaml")

	sa := operatorConfig(api.Config)
	saClient, err := client.New(sa, client.Options{Scheme: api.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
	w.dropEmptyDir(t)
	applyManifest(t, api.Client, "../../deploy/quantykube.yaml") // resetWorld keeps no Installation, the manifest has none
	if err := EnsureInstallation(ctx, saClient); err != nil {
		t.Fatalf("create the Installation as the operator: %v", err)
	}
	w.api = &testAPI{Config: sa, Client: saClient, dir: api.dir}
	kube, err := newClientset(sa)
	if err != nil {
		t.Fatal(err)
	}
	w.kube = kube
	_, in := w.runUntil(t, 60, v1.PhaseMoved, v1.PhaseFailed)
	checkGoal(t, in, v1.PhaseMoved)
	patchUndo(t, api.Client, true)
	_, in = w.runUntil(t, 60, v1.PhaseUndone, v1.PhaseFailed)
	checkGoal(t, in, v1.PhaseUndone)
}

func applyManifest(t *testing.T, c client.Client, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v (run scripts/generate.sh)", path, err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	n := 0
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode %s: %v", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		n++
		if err := c.Create(context.Background(), u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	if n < 8 {
		t.Fatalf("%s has %d objects; want namespace, CRD, service account, roles, bindings, deployment", path, n)
	}
}

func newClientset(cfg *rest.Config) (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(cfg)
}

// operatorConfig impersonates the operator's service account.
func operatorConfig(admin *rest.Config) *rest.Config {
	sa := rest.CopyConfig(admin)
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + Namespace + ":quantykube-operator",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + Namespace, "system:authenticated"},
	}
	return sa
}
