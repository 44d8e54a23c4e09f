package noderuntime

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/quantyroot/quantykube/test/harness"
)

// cluster is the scenario's environment, set by `scripts/kubeadm.sh node`.
type cluster struct {
	*harness.Cluster
	kubeconfig string
	worker, cp string // node names
	qk         string // quantykube binary on the host, copied into the nodes
	image      string // workload image every node holds
	cs         *kubernetes.Clientset
}

// installArgs are the flags every install runs with: the harness's nodes
// have no registry, their images are tarballs bound at /opt/quantykube/images.
var installArgs = []string{"quantykube", "install", "runtime", "--image-archives", "/opt/quantykube/images"}

var waitFor = harness.WaitFor

func setup(t *testing.T) *cluster {
	c := &cluster{
		kubeconfig: os.Getenv("QK_NR_KUBECONFIG"), worker: os.Getenv("QK_NR_WORKER"), cp: os.Getenv("QK_NR_CP"),
		qk: os.Getenv("QK_NR_BIN"), image: os.Getenv("QK_WORKLOAD_IMAGE"),
	}
	if c.kubeconfig == "" || c.worker == "" || c.cp == "" || c.qk == "" {
		if os.Getenv("CI") == "true" && os.Getenv("QK_NR_REQUIRED") == "true" {
			t.Fatal("QK_NR_KUBECONFIG, QK_NR_WORKER, QK_NR_CP and QK_NR_BIN must be set; run `scripts/kubeadm.sh node`")
		}
		t.Skip("no cluster: run `scripts/kubeadm.sh node`, which sets QK_NR_* for this test")
	}
	if c.image == "" {
		c.image = "quantykube.local/busybox:1"
	}
	c.Cluster = harness.Connect(t, c.kubeconfig, 100)
	c.cs = c.CS
	for _, n := range []string{c.worker, c.cp} {
		c.CopyIn(t, n, c.qk, "/usr/local/bin/quantykube")
		// The nodes' root is an overlay, where container layers cannot live
		// (install refuses it): the harness binds a real directory there.
		if !c.nodeOK(n, "mountpoint", "-q", "/var/lib/quantykube/runtime") {
			t.Fatalf("/var/lib/quantykube/runtime is not a mount on %s: the cluster predates the harness's bind of it; run `scripts/kubeadm.sh up` again", n)
		}
	}
	return c
}

// node runs a command on a node; the error is returned.
func (c *cluster) node(name string, args ...string) (string, error) { return c.Exec(name, args...) }

func (c *cluster) mustNode(t *testing.T, name string, args ...string) string {
	t.Helper()
	return c.MustExec(t, name, args...)
}

// kubectl runs the host's kubectl against the cluster.
func (c *cluster) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", c.kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// runtimeOf is the runtime the node reports ("containerd", "quantykube").
func (c *cluster) runtimeOf(t *testing.T, node string) string {
	t.Helper()
	var n *corev1.Node
	err := retry(func() (err error) {
		n, err = c.cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	v := n.Status.NodeInfo.ContainerRuntimeVersion
	return v[:max(0, strings.Index(v, "://"))]
}

// onContainerd puts node back on containerd if an earlier test left it on
// quantykube runtime: every test starts from the node as kubeadm made it.
func (c *cluster) onContainerd(t *testing.T, node string) {
	t.Helper()
	if c.runtimeOf(t, node) != "containerd" {
		c.mustNode(t, node, "quantykube", "undo", "runtime")
	}
}

// readyOn waits until node is Ready on runtime.
func (c *cluster) readyOn(t *testing.T, node, runtime string) {
	t.Helper()
	harness.Eventually(t, node+" Ready on "+runtime, 3*time.Minute, func(ctx context.Context) error {
		return c.readyNow(ctx, node, runtime)
	})
}

// readyNow is nil when node is Ready with its containers on runtime now.
func (c *cluster) readyNow(ctx context.Context, node, runtime string) error {
	n, err := c.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, runtime+"://") {
		return fmt.Errorf("%s runs %s", node, n.Status.NodeInfo.ContainerRuntimeVersion)
	}
	for _, cd := range n.Status.Conditions {
		if cd.Type == corev1.NodeReady && cd.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("%s is not Ready", node)
}

// retry calls f every second until it succeeds, for at most 90 s.
func retry(f func() error) error {
	return harness.Poll(context.Background(), time.Second, 90*time.Second, func(context.Context) error { return f() })
}

// podsRunOn waits until every pod matching selector runs on node, all its
// containers on runtime, and returns their names.
func (c *cluster) podsRunOn(t *testing.T, selector, node, runtime string, want int) []string {
	t.Helper()
	var names []string
	waitFor(t, fmt.Sprintf("%d pods %s running on %s (%s)", want, selector, node, runtime), 3*time.Minute, func() bool {
		list, err := c.cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false
		}
		names = names[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
				return false
			}
			for _, cs := range p.Status.ContainerStatuses {
				if !cs.Ready || !strings.HasPrefix(cs.ContainerID, runtime+"://") {
					return false
				}
			}
			names = append(names, p.Name)
		}
		return len(names) == want
	})
	return names
}

// workload creates a Deployment of replicas pods and a DaemonSet, both
// pinned to node, each container serving "hello NAME" on :8080.
func (c *cluster) workload(t *testing.T, node string, replicas int32) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": "nr-web"}
	spec := corev1.PodSpec{
		NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
		TerminationGracePeriodSeconds: new(int64),
		Containers: []corev1.Container{{Name: "web", Image: c.image, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"/bin/sh", "-c", `echo "started $(hostname)"; while true; do echo "hello $(hostname)" | nc -l -p 8080; done`}}},
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "nr-web"}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}
	if _, err := c.cs.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dsLabels := map[string]string{"app": "nr-agent"}
	dsSpec := spec
	dsSpec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "nr-agent"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: dsLabels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: dsLabels}, Spec: dsSpec}}}
	if _, err := c.cs.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// deleteWorkload removes what workload made.
func (c *cluster) deleteWorkload(t *testing.T) {
	ctx := context.Background()
	_ = c.cs.AppsV1().Deployments("default").Delete(ctx, "nr-web", metav1.DeleteOptions{})
	_ = c.cs.AppsV1().DaemonSets("default").Delete(ctx, "nr-agent", metav1.DeleteOptions{})
}

// quiet scales the harness's smoke Deployment pinned to node (it tolerates
// every taint, so a drain cannot keep it off) to zero; the returned function
// scales it back.
func (c *cluster) quiet(t *testing.T, node string) func() {
	t.Helper()
	ctx := context.Background()
	name := "hello-" + node
	d, err := c.cs.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return func() {}
	}
	old := *d.Spec.Replicas
	c.kubectl(t, "scale", "deploy", name, "--replicas=0")
	return func() { c.kubectl(t, "scale", "deploy", name, fmt.Sprintf("--replicas=%d", old)) }
}

// drain cordons node and evicts all but its static and DaemonSet pods.
func (c *cluster) drain(t *testing.T, node string) {
	t.Helper()
	c.kubectl(t, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=120s")
}

// fingerprint of what a refused install, a rollback or an undo must leave
// as it was: the kubelet's files and containerd's state.
func (c *cluster) fingerprint(t *testing.T, node string) string {
	t.Helper()
	return c.mustNode(t, node, "sha256sum", "/var/lib/kubelet/config.yaml", "/var/lib/kubelet/kubeadm-flags.env") + c.containerdState(t, node)
}

// containerdState fingerprints the old runtime's state, which nothing may
// change: its images, its content store and its configuration (config.toml and
// the certs.d hosts files install runtime reads to carry the registries over).
func (c *cluster) containerdState(t *testing.T, node string) string {
	t.Helper()
	return c.mustNode(t, node, "sh", "-c", `ctr -n k8s.io images ls -q | sort | sha256sum; ls /var/lib/containerd/io.containerd.content.v1.content/blobs/sha256 | sha256sum; find /etc/containerd -type f | sort | xargs sha256sum`)
}
