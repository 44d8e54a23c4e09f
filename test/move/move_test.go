package move

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/quantyroot/quantykube/test/harness"
)

// cluster is the scenario's environment, set by `scripts/kubeadm.sh move`.
type cluster struct {
	*harness.Cluster
	cs      *kubernetes.Clientset
	cp      string // control-plane node name
	etcdctl string // etcdctl binary on the host, copied into the node
	qk      string // quantykube binary on the host, copied into the node
}

var (
	waitFor = harness.WaitFor
	retry   = harness.Retry
)

func setup(t *testing.T) *cluster {
	kubeconfig := os.Getenv("QK_MOVE_KUBECONFIG")
	c := &cluster{cp: os.Getenv("QK_MOVE_NODE"), etcdctl: os.Getenv("QK_ETCDCTL"), qk: os.Getenv("QK_STORE_BIN")}
	if kubeconfig == "" || c.cp == "" || c.etcdctl == "" || c.qk == "" {
		if os.Getenv("CI") == "true" && os.Getenv("QK_MOVE_REQUIRED") == "true" {
			t.Fatal("QK_MOVE_KUBECONFIG, QK_MOVE_NODE, QK_ETCDCTL and QK_STORE_BIN must be set; run `scripts/kubeadm.sh move`")
		}
		t.Skip("no cluster: run `scripts/kubeadm.sh move`, which sets QK_MOVE_* for this test")
	}
	c.Cluster = harness.Connect(t, kubeconfig, 200)
	c.cs = c.CS
	c.CopyIn(t, c.cp, c.qk, "/usr/local/bin/quantykube")
	c.CopyIn(t, c.cp, c.etcdctl, "/usr/local/bin/etcdctl")
	return c
}

func (c *cluster) harness(t *testing.T, args ...string) string {
	t.Helper()
	return c.Harness(t, args...)
}

// node runs a command on the control-plane node; the error is returned.
func (c *cluster) node(args ...string) (string, error) { return c.Exec(c.cp, args...) }

func (c *cluster) mustNode(t *testing.T, args ...string) string {
	t.Helper()
	return c.MustExec(t, c.cp, args...)
}

const etcdFlags = "--endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/apiserver-etcd-client.crt --key=/etc/kubernetes/pki/apiserver-etcd-client.key"

// etcdHashKV is etcd's own hash of its keyspace at rev, and its revision.
func (c *cluster) etcdHashKV(t *testing.T, rev int64) (hash string, cur int64) {
	t.Helper()
	out := c.mustNode(t, "sh", "-c", fmt.Sprintf("etcdctl %s endpoint hashkv --rev %d -w json", etcdFlags, rev))
	h := regexp.MustCompile(`"hash":(\d+)`).FindStringSubmatch(out)
	r := regexp.MustCompile(`"revision":(\d+)`).FindStringSubmatch(out)
	if h == nil || r == nil {
		t.Fatalf("etcdctl endpoint hashkv: %s", out)
	}
	cur, _ = strconv.ParseInt(r[1], 10, 64)
	return h[1], cur
}

// objects lists every ConfigMap and Secret with its resourceVersion.
func (c *cluster) objects(t *testing.T) (map[string]string, string) {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	cms, err := c.cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range cms.Items {
		out["cm/"+o.Namespace+"/"+o.Name] = o.ResourceVersion
	}
	ss, err := c.cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range ss.Items {
		out["secret/"+o.Namespace+"/"+o.Name] = o.ResourceVersion
	}
	return out, cms.ResourceVersion
}

// watcher follows ConfigMaps like an informer would: from a resourceVersion,
// resuming from the last one it saw after every disconnect, relisting on 410.
type watcher struct {
	mu       sync.Mutex
	seen     map[string]bool // names created or modified, as seen
	relisted int
	resumed  int
}

func (w *watcher) run(ctx context.Context, cs *kubernetes.Clientset, rv string) {
	for ctx.Err() == nil {
		wi, err := cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for ev := range wi.ResultChan() {
			switch ev.Type {
			case watch.Error:
				if st, ok := ev.Object.(*metav1.Status); ok && st.Code == 410 {
					list, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
					if err == nil {
						w.mu.Lock()
						w.relisted++
						for _, o := range list.Items {
							w.seen[o.Namespace+"/"+o.Name] = true
						}
						w.mu.Unlock()
						rv = list.ResourceVersion
					}
				}
			default:
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
					rv = cm.ResourceVersion
					if ev.Type != watch.Bookmark {
						w.mu.Lock()
						w.seen[cm.Namespace+"/"+cm.Name] = true
						w.mu.Unlock()
					}
				}
			}
		}
		w.mu.Lock()
		w.resumed++
		w.mu.Unlock()
	}
}

func (w *watcher) saw(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[name]
}

// podRuns creates a pod (no node chosen: the scheduler must place it) and
// waits until it runs.
func (c *cluster) podRuns(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	image := os.Getenv("QK_WORKLOAD_IMAGE")
	if image == "" {
		image = "quantykube.local/busybox:1"
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "c", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/bin/sh", "-c", "sleep 3600"}}},
		},
	}
	if _, err := c.cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.podGone(t, name) })
	waitFor(t, "pod "+name+" Running", 3*time.Minute, func() bool {
		p, err := c.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning
	})
}

// podGone deletes a pod podRuns made and waits until it is gone: a bare
// pod left on a node makes every later drain of it refuse (the operator's
// e2e runs next on the same cluster).
func (c *cluster) podGone(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	err := retry(func() error {
		err := c.cs.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Errorf("delete pod %s: %v", name, err)
		return
	}
	waitFor(t, "pod "+name+" gone", 2*time.Minute, func() bool {
		_, err := c.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

func (c *cluster) createCM(t *testing.T, name string) {
	t.Helper()
	err := retry(func() error {
		_, err := c.cs.CoreV1().ConfigMaps("default").Create(context.Background(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"at": time.Now().String()}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func manifestEtcdServers(t *testing.T, c *cluster) string {
	out := c.mustNode(t, "grep", "-e", "--etcd-servers", "/etc/kubernetes/manifests/kube-apiserver.yaml")
	return strings.TrimSpace(out)
}

// kubeadmConfigKey is kube-system/kubeadm-config in c.objects' keys.
const kubeadmConfigKey = "cm/kube-system/kubeadm-config"

// clusterConfig is kubeadm's ClusterConfiguration as the API serves it.
func (c *cluster) clusterConfig(t *testing.T) string {
	t.Helper()
	var cfg string
	err := retry(func() error {
		cm, err := c.cs.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
		if err == nil {
			cfg = cm.Data["ClusterConfiguration"]
		}
		return err
	})
	if err != nil {
		t.Fatalf("read kube-system/kubeadm-config: %v", err)
	}
	return cfg
}

// savedClusterConfig is the ClusterConfiguration install saved before it
// named the store (what undo must restore byte for byte).
func (c *cluster) savedClusterConfig(t *testing.T) string {
	t.Helper()
	return c.mustNode(t, "cat", "/var/lib/quantykube/install/store/kubeadm-config.etcd.yaml")
}

// worker is the name of a worker node (the harness pins a hello Deployment
// on each node).
func (c *cluster) worker(t *testing.T) string {
	t.Helper()
	nodes, err := c.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "!node-role.kubernetes.io/control-plane"})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("no worker node: %v", err)
	}
	return nodes.Items[0].Name
}
