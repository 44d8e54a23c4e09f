package noderuntime

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestControlPlaneWithStoreMoved: the API server of the control-plane node
// is moved onto quantykube store (install store), then the node onto
// quantykube runtime: its static pods come back there and the store, a
// systemd unit outside any runtime, answers etcd reads throughout (probed
// twice a second on the node); objects written on the store keep their
// resourceVersions across the API server's restart. Then undo runtime, then
// undo store (last: the store was moved first), and the cluster schedules
// pods on etcd and containerd again. Runs last in the package (file order):
// it leaves the node as it found it, on etcd and containerd.
func TestControlPlaneWithStoreMoved(t *testing.T) {
	c := setup(t)
	cp := c.cp
	etcdctl := os.Getenv("QK_ETCDCTL")
	if etcdctl == "" {
		if os.Getenv("CI") == "true" && os.Getenv("QK_NR_REQUIRED") == "true" {
			t.Fatal("QK_ETCDCTL must be set; run `scripts/kubeadm.sh node`")
		}
		t.Skip("no etcdctl: run `scripts/kubeadm.sh node`, which sets QK_ETCDCTL")
	}
	c.CopyIn(t, cp, etcdctl, "/usr/local/bin/etcdctl")
	c.putBackStore(t)
	defer c.quiet(t, cp)()
	c.drain(t, cp)
	defer c.kubectl(t, "uncordon", cp)
	defer func() {
		if t.Failed() {
			c.putBackStore(t)
		}
	}()

	out := c.mustNode(t, cp, "quantykube", "install", "store")
	t.Logf("install store on %s:\n%s", cp, out)
	if !c.onStore(t) {
		t.Fatalf("the API server does not point at the store after install store: %s", c.etcdServers(t))
	}
	objs := c.writeConfigMaps(t, "nr-store", 5)

	probe := c.probeStore(t)
	start := time.Now()
	out = c.mustNode(t, cp, installArgs...)
	t.Logf("install runtime on %s (API server on the store) in %v:\n%s", cp, time.Since(start).Round(time.Millisecond), out)
	c.staticPodsOn(t, "quantykube")
	probe.stop(t, "install runtime")
	c.sameConfigMaps(t, objs)
	maps.Copy(objs, c.writeConfigMaps(t, "nr-store-qk", 2))

	probe = c.probeStore(t)
	start = time.Now()
	out = c.mustNode(t, cp, "quantykube", "undo", "runtime")
	t.Logf("undo runtime on %s (API server on the store) in %v:\n%s", cp, time.Since(start).Round(time.Millisecond), out)
	c.staticPodsOn(t, "containerd")
	probe.stop(t, "undo runtime")
	c.sameConfigMaps(t, objs)

	out = c.mustNode(t, cp, "quantykube", "undo", "store")
	t.Logf("undo store on %s:\n%s", cp, out)
	if c.onStore(t) {
		t.Fatalf("the API server still points at the store after undo store: %s", c.etcdServers(t))
	}
	for name := range objs {
		if _, err := c.cs.CoreV1().ConfigMaps("default").Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			t.Fatalf("%s, written on the store, is not on etcd after undo store: %v", name, err)
		}
	}
	t.Logf("the %d ConfigMaps written on the store are on etcd", len(objs))
	c.podScheduled(t, "nr-after-store", c.worker)
	c.deleteConfigMaps(t, "nr-store")
}

// putBackStore moves the control-plane node back to containerd, then its
// API server back to etcd, whichever of the two is still moved (runtime
// first: the store was moved first). Errors are logged only.
func (c *cluster) putBackStore(t *testing.T) {
	t.Helper()
	if c.runtimeOf(t, c.cp) != "containerd" {
		out, err := c.node(c.cp, "quantykube", "undo", "runtime")
		t.Logf("put back: undo runtime: %v\n%s", err, out)
	}
	if c.onStore(t) {
		out, err := c.node(c.cp, "quantykube", "undo", "store")
		t.Logf("put back: undo store: %v\n%s", err, out)
	}
}

// etcdServers is the API server manifest's --etcd-servers line.
func (c *cluster) etcdServers(t *testing.T) string {
	t.Helper()
	return strings.TrimSpace(c.mustNode(t, c.cp, "grep", "-e", "--etcd-servers", "/etc/kubernetes/manifests/kube-apiserver.yaml"))
}

// onStore: the API server's manifest points at quantykube store.
func (c *cluster) onStore(t *testing.T) bool {
	t.Helper()
	return strings.Contains(c.etcdServers(t), "127.0.0.1:2479")
}

// writeConfigMaps creates n ConfigMaps PREFIX-i in default and returns
// their resourceVersions by name.
func (c *cluster) writeConfigMaps(t *testing.T, prefix string, n int) map[string]string {
	t.Helper()
	rvs := map[string]string{}
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Labels: map[string]string{"nr-store": "true"}},
			Data: map[string]string{"written": time.Now().UTC().Format(time.RFC3339Nano)}}
		var got *corev1.ConfigMap
		if err := retry(func() (err error) {
			got, err = c.cs.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{})
			return err
		}); err != nil {
			t.Fatalf("create ConfigMap %s: %v", cm.Name, err)
		}
		rvs[got.Name] = got.ResourceVersion
	}
	return rvs
}

// sameConfigMaps wants every ConfigMap of rvs with its resourceVersion.
func (c *cluster) sameConfigMaps(t *testing.T, rvs map[string]string) {
	t.Helper()
	for name, rv := range rvs {
		var cm *corev1.ConfigMap
		if err := retry(func() (err error) {
			cm, err = c.cs.CoreV1().ConfigMaps("default").Get(context.Background(), name, metav1.GetOptions{})
			return err
		}); err != nil {
			t.Fatalf("ConfigMap %s: %v", name, err)
		}
		if cm.ResourceVersion != rv {
			t.Fatalf("ConfigMap %s: resourceVersion %s before, %s now", name, rv, cm.ResourceVersion)
		}
	}
	t.Logf("%d ConfigMaps kept their resourceVersions", len(rvs))
}

func (c *cluster) deleteConfigMaps(t *testing.T, label string) {
	t.Helper()
	if err := c.cs.CoreV1().ConfigMaps("default").DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: label + "=true"}); err != nil {
		t.Errorf("delete the test's ConfigMaps: %v", err)
	}
}

// podScheduled creates a pod pinned to node by its label (so the scheduler
// places it), waits until it runs, and deletes it.
func (c *cluster) podScheduled(t *testing.T, name, node string) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
		TerminationGracePeriodSeconds: new(int64),
		Containers: []corev1.Container{{Name: "c", Image: c.image, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"/bin/sh", "-c", "sleep 3600"}}},
	}}
	if err := retry(func() error {
		_, err := c.cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	defer c.cs.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
	defer func() {
		if t.Failed() {
			c.describePod(t, name, node)
		}
	}()
	waitFor(t, name+" scheduled and running", 3*time.Minute, func() bool {
		p, err := c.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning
	})
	t.Logf("pod %s scheduled onto %s and running", name, node)
}

// describePod logs what a pod that did not run is waiting for: its phase,
// node, conditions and containers' states, its events, and its node's
// Ready condition (CI on 6 December: a pod not running 3 minutes after undo
// store, and the failure said only "not yet").
func (c *cluster) describePod(t *testing.T, name, node string) {
	t.Helper()
	ctx := context.Background()
	if p, err := c.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Logf("pod %s: %v", name, err)
	} else {
		t.Logf("pod %s: phase %s on %q", name, p.Status.Phase, p.Spec.NodeName)
		for _, cond := range p.Status.Conditions {
			t.Logf("  condition %s=%s %s %s", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
		for _, cs := range p.Status.ContainerStatuses {
			t.Logf("  container %s: %+v", cs.Name, cs.State)
		}
	}
	if evs, err := c.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name}); err == nil {
		for _, e := range evs.Items {
			t.Logf("  event %s %s (%s, %d×): %s", e.LastTimestamp.UTC().Format(time.TimeOnly), e.Reason, e.Source.Component, e.Count, e.Message)
		}
	}
	if n, err := c.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				t.Logf("node %s Ready=%s since %s: %s", node, cond.Status, cond.LastTransitionTime.UTC().Format(time.TimeOnly), cond.Message)
			}
		}
	}
}

// storeProbe reads a key from quantykube store on the control-plane node
// every half second (a transient systemd unit there), with the API
// server's own client certificate, until stopped.
type storeProbe struct{ c *cluster }

const probeUnit = "qk-nr-store-probe"

const storeFlags = "--endpoints=https://127.0.0.1:2479 --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/apiserver-etcd-client.crt --key=/etc/kubernetes/pki/apiserver-etcd-client.key --dial-timeout=2s --command-timeout=3s"

func (c *cluster) probeStore(t *testing.T) *storeProbe {
	t.Helper()
	c.node(c.cp, "systemctl", "stop", probeUnit)
	c.node(c.cp, "systemctl", "reset-failed", probeUnit)
	script := `while :; do o=$(etcdctl ` + storeFlags + ` get --keys-only /registry/namespaces/default 2>&1)
		case "$o" in */registry/namespaces/default*) echo ok;; *) echo "fail $(date -u +%T.%N) $(echo $o | head -c 200)";; esac
		sleep 0.5; done`
	c.mustNode(t, c.cp, "sh", "-c", "rm -f /tmp/"+probeUnit+".log && systemd-run --quiet --collect --unit "+probeUnit+
		" -p StandardOutput=file:/tmp/"+probeUnit+".log sh -c '"+script+"'")
	waitFor(t, "the store probe's first answer", 30*time.Second, func() bool {
		out, _ := c.node(c.cp, "cat", "/tmp/"+probeUnit+".log")
		return strings.Contains(out, "ok")
	})
	return &storeProbe{c: c}
}

// stop ends the probe and fails the test if any read failed.
func (p *storeProbe) stop(t *testing.T, during string) {
	t.Helper()
	p.c.mustNode(t, p.c.cp, "systemctl", "stop", probeUnit)
	out := p.c.mustNode(t, p.c.cp, "cat", "/tmp/"+probeUnit+".log")
	ok, fails := 0, []string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "ok" {
			ok++
		} else if l != "" {
			fails = append(fails, l)
		}
	}
	t.Logf("figure: store probe during %s: %d reads answered, %d failed", during, ok, len(fails))
	if len(fails) > 0 {
		t.Fatalf("quantykube store did not answer %d of %d reads during %s:\n%s", len(fails), ok+len(fails), during, strings.Join(fails, "\n"))
	}
	if ok < 4 {
		t.Fatalf("the store probe ran only %d reads during %s", ok, during)
	}
}
