package e2e

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/test/harness"
)

// cluster is the test's environment, set by `scripts/kubeadm.sh e2e`.
type cluster struct {
	*harness.Cluster
	worker, cp string // node names
	manifest   string // the release's quantykube.yaml (scripts/release.sh)
	demo       bool   // the demo: a clean run, no operator kills, no fault
	c          client.Client
}

func setup(t *testing.T) *cluster {
	c := &cluster{
		worker: os.Getenv("QK_E2E_WORKER"), cp: os.Getenv("QK_E2E_CP"),
		manifest: os.Getenv("QK_E2E_MANIFEST"), demo: os.Getenv("QK_E2E_DEMO") == "true",
	}
	kubeconfig := os.Getenv("QK_E2E_KUBECONFIG")
	if kubeconfig == "" || c.worker == "" || c.cp == "" || c.manifest == "" {
		if os.Getenv("CI") == "true" && os.Getenv("QK_E2E_REQUIRED") == "true" {
			t.Fatal("QK_E2E_KUBECONFIG, QK_E2E_WORKER, QK_E2E_CP and QK_E2E_MANIFEST must be set; run `scripts/kubeadm.sh e2e`")
		}
		t.Skip("no cluster: run `scripts/kubeadm.sh e2e`, which sets QK_E2E_* for this test")
	}
	c.Cluster = harness.Connect(t, kubeconfig, 100)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if c.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	return c
}

// kubectl runs the host's kubectl against the cluster, stdin from in.
func (c *cluster) kubectl(t *testing.T, in string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(in)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// applyManifest applies the release's quantykube.yaml unchanged, as a user would:
// the operator finds the API server through the kubernetes Service
// (kube-proxy, installed by kubeadm, routes it).
func (c *cluster) applyManifest(t *testing.T) {
	t.Helper()
	c.kubectl(t, "", "apply", "-f", c.manifest)
}

// pinnedImage finds the image a release's manifest names, pinned by digest.
var pinnedImage = regexp.MustCompile(`(?m)^\s*image: (\S+@sha256:[0-9a-f]{64})$`)

// runsTheRelease: the operator that wrote the status is the manifest's
// build, and its host pods run the image the manifest pins by digest
// (status.operator, scripts/release.sh's quantykube.yaml).
func (c *cluster) runsTheRelease(t *testing.T, in *v1.Installation, when string) {
	t.Helper()
	b, err := os.ReadFile(c.manifest)
	if err != nil {
		t.Fatalf("read the manifest: %v", err)
	}
	m := pinnedImage.FindSubmatch(b)
	if m == nil {
		t.Errorf("%s names no image pinned by digest: install scripts/release.sh's quantykube.yaml", c.manifest)
		return
	}
	if op := in.Status.Operator; op == nil || op.Image != string(m[1]) || op.Commit == "" || !strings.Contains(op.Image, op.Version+"-"+op.Commit+"@") {
		t.Errorf("%s: status.operator = %+v; want the build of %s (its version and commit)", when, op, m[1])
	}
}

// installation reads the Installation; nil while it does not exist or the
// API server is away (the store move restarts it).
func (c *cluster) installation() *v1.Installation {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in := &v1.Installation{}
	if err := c.c.Get(ctx, client.ObjectKey{Name: v1.Name}, in); err != nil {
		return nil
	}
	return in
}

// patchSpec merges spec into the Installation's spec.
func (c *cluster) patchSpec(t *testing.T, spec string) {
	t.Helper()
	err := harness.Retry(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		in := &v1.Installation{ObjectMeta: metav1.ObjectMeta{Name: v1.Name}}
		return c.c.Patch(ctx, in, client.RawPatch("application/merge-patch+json", []byte(`{"spec":`+spec+`}`)))
	})
	if err != nil {
		t.Fatalf("patch installation spec %s: %v", spec, err)
	}
}

// node reads a node (retrying across API-server restarts).
func (c *cluster) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	var n *corev1.Node
	err := harness.Retry(func() (err error) {
		n, err = c.CS.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// runtimeOf is the runtime a node reports ("containerd", "quantykube").
func (c *cluster) runtimeOf(t *testing.T, name string) string {
	t.Helper()
	v := c.node(t, name).Status.NodeInfo.ContainerRuntimeVersion
	return v[:max(0, strings.Index(v, "://"))]
}

// onStore reports whether kube-apiserver is configured for QuantyKube's
// store (its manifest's --etcd-servers names port 2479) rather than etcd.
func (c *cluster) onStore(t *testing.T) bool {
	t.Helper()
	out := c.MustExec(t, c.cp, "grep", "-e", "--etcd-servers", "/etc/kubernetes/manifests/kube-apiserver.yaml")
	return strings.Contains(out, "127.0.0.1:2479")
}

// fromScratch makes a rerun on the same cluster start where a first run
// does: an Installation left Undone (or never started) is deleted with the
// operator's Deployment, so the manifest's fresh apply runs the image just
// built and the operator creates the Installation anew. A cluster left
// mid-move is refused: it needs its undo first.
func (c *cluster) fromScratch(t *testing.T) {
	t.Helper()
	in := c.installation()
	if in == nil {
		return
	}
	switch in.Status.Phase {
	case "", v1.PhasePending, v1.PhaseUndone:
	default:
		t.Fatalf("the cluster's Installation is %s (%s): patch spec.undo to true and wait for Undone, or start from a new cluster (scripts/kubeadm.sh up --workers 1)", in.Status.Phase, in.Status.Message)
	}
	t.Logf("an earlier run left the Installation %s: deleting it and the operator", in.Status.Phase)
	c.kubectl(t, "", "-n", "quantykube-system", "delete", "deployment", "quantykube-operator", "--ignore-not-found", "--wait")
	c.kubectl(t, "", "delete", "installation", v1.Name, "--ignore-not-found", "--wait")
}
