package noderuntime

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quantyroot/quantykube/test/harness"
)

// TestWorkerAndBack: a worker with a Deployment and a DaemonSet is drained,
// moved onto quantykube runtime, uncordoned: its pods run there and exec,
// logs and port-forward work; undo brings it back to containerd with pods
// running; containerd's images and content were never changed.
func TestWorkerAndBack(t *testing.T) {
	c := setup(t)
	w := c.worker
	c.onContainerd(t, w)
	defer c.quiet(t, w)()
	c.workload(t, w, 2)
	defer c.deleteWorkload(t)
	c.podsRunOn(t, "app=nr-web", w, "containerd", 2)
	c.podsRunOn(t, "app=nr-agent", w, "containerd", 1)

	c.drain(t, w)
	before := c.fingerprint(t, w)
	out := c.mustNode(t, w, "quantykube", "install", "runtime", "--dry-run")
	if !strings.Contains(out, "preflight: ok") || !strings.Contains(out, "default/nr-agent-") {
		t.Fatalf("the dry run does not name the DaemonSet pod that restarts:\n%s", out)
	}
	start := time.Now()
	out = c.mustNode(t, w, installArgs...)
	t.Logf("install runtime on %s in %v:\n%s", w, time.Since(start).Round(time.Millisecond), out)
	if c.runtimeOf(t, w) != "quantykube" {
		t.Fatalf("%s does not report quantykube runtime", w)
	}
	c.kubectl(t, "uncordon", w)
	pods := c.podsRunOn(t, "app=nr-web", w, "quantykube", 2)
	c.podsRunOn(t, "app=nr-agent", w, "quantykube", 1)
	c.streams(t, pods[0])
	c.survivesRuntimeKill(t, w, "app=nr-web")
	if after := c.containerdState(t, w); !strings.HasSuffix(before, after) {
		t.Fatalf("install changed containerd's state:\nbefore %s\nafter  %s", before, after)
	}

	c.drain(t, w)
	start = time.Now()
	out = c.mustNode(t, w, "quantykube", "undo", "runtime")
	t.Logf("undo runtime on %s in %v:\n%s", w, time.Since(start).Round(time.Millisecond), out)
	c.readyOn(t, w, "containerd")
	if after := c.fingerprint(t, w); after != before {
		t.Fatalf("undo did not restore the kubelet's files byte for byte, or containerd changed:\nbefore %s\nafter  %s", before, after)
	}
	if out, err := c.node(w, "systemctl", "is-active", "quantykube-runtime"); err == nil {
		t.Fatalf("quantykube-runtime is still active after undo: %s", out)
	}
	c.kubectl(t, "uncordon", w)
	pods = c.podsRunOn(t, "app=nr-web", w, "containerd", 2)
	c.podsRunOn(t, "app=nr-agent", w, "containerd", 1)
	c.streams(t, pods[0])
}

// streams checks kubectl exec, logs and port-forward against pod.
func (c *cluster) streams(t *testing.T, pod string) {
	t.Helper()
	if out := c.kubectl(t, "exec", pod, "--", "sh", "-c", "echo exec-$((40+2))"); !strings.Contains(out, "exec-42") {
		t.Fatalf("kubectl exec: %s", out)
	}
	if out := c.kubectl(t, "logs", pod); !strings.Contains(out, "started "+pod) {
		t.Fatalf("kubectl logs: %s", out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pf := exec.CommandContext(ctx, "kubectl", "--kubeconfig", c.kubeconfig, "port-forward", "pod/"+pod, fmt.Sprintf("%d:8080", port))
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); pf.Wait() }()
	var got string
	waitFor(t, "port-forward to "+pod, 30*time.Second, func() bool {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err != nil {
			return false
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(3 * time.Second))
		got, _ = bufio.NewReader(conn).ReadString('\n')
		return strings.Contains(got, "hello "+pod)
	})
	t.Logf("exec, logs and port-forward work on %s (%s)", pod, strings.TrimSpace(got))
}

// TestControlPlaneAndBack: the control-plane node's static pods (etcd, the
// API server, controller-manager, scheduler) come back on quantykube runtime
// and the API serves writes; undo brings them back on containerd.
func TestControlPlaneAndBack(t *testing.T) {
	c := setup(t)
	cp := c.cp
	c.onContainerd(t, cp)
	defer c.quiet(t, cp)()
	c.drain(t, cp)
	defer c.kubectl(t, "uncordon", cp)
	before := c.fingerprint(t, cp)
	start := time.Now()
	out := c.mustNode(t, cp, installArgs...)
	t.Logf("install runtime on %s in %v:\n%s", cp, time.Since(start).Round(time.Millisecond), out)
	c.staticPodsOn(t, "quantykube")
	c.kubectl(t, "create", "configmap", fmt.Sprintf("nr-cp-%d", time.Now().UnixNano()))

	start = time.Now()
	out = c.mustNode(t, cp, "quantykube", "undo", "runtime")
	t.Logf("undo runtime on %s in %v:\n%s", cp, time.Since(start).Round(time.Millisecond), out)
	c.staticPodsOn(t, "containerd")
	if after := c.fingerprint(t, cp); after != before {
		t.Fatalf("install+undo changed the kubelet's files or containerd:\nbefore %s\nafter  %s", before, after)
	}
	c.kubectl(t, "create", "configmap", fmt.Sprintf("nr-cp-%d", time.Now().UnixNano()))
}

// staticPodsOn waits for the four control-plane static pods Ready on runtime.
func (c *cluster) staticPodsOn(t *testing.T, runtime string) {
	t.Helper()
	c.readyOn(t, c.cp, runtime)
	for _, p := range staticPods {
		name := p + "-" + c.cp
		waitFor(t, name+" on "+runtime, 3*time.Minute, func() bool {
			out, err := exec.Command("kubectl", "--kubeconfig", c.kubeconfig, "-n", "kube-system", "get", "pod", name,
				"-o", `jsonpath={.status.containerStatuses[0].containerID} {.status.containerStatuses[0].ready}`).Output()
			return err == nil && strings.HasPrefix(string(out), runtime+"://") && strings.HasSuffix(string(out), " true")
		})
	}
	t.Logf("etcd, kube-apiserver, kube-controller-manager and kube-scheduler run on %s", runtime)
}

// survivesRuntimeKill kills the runtime's main process with SIGKILL (the
// monitors and containers stay): systemd restarts it, it recovers its
// state, the pods' containers are the same ones with no restart, the node
// stays Ready, and exec, logs and port-forward still work.
func (c *cluster) survivesRuntimeKill(t *testing.T, node, selector string) {
	t.Helper()
	before := c.containerIDs(t, selector, node)
	pid := strings.TrimSpace(c.mustNode(t, node, "systemctl", "show", "-p", "MainPID", "--value", "quantykube-runtime"))
	c.mustNode(t, node, "systemctl", "kill", "--kill-whom=main", "--signal=SIGKILL", "quantykube-runtime")
	waitFor(t, "quantykube-runtime restarted by systemd", time.Minute, func() bool {
		out, err := c.node(node, "systemctl", "show", "-p", "MainPID", "--value", "quantykube-runtime")
		now := strings.TrimSpace(out)
		return err == nil && now != "0" && now != pid && c.nodeOK(node, "systemctl", "is-active", "quantykube-runtime")
	})
	harness.Holds(t, node+" stays Ready on quantykube after the runtime's kill -9", 20*time.Second, func(ctx context.Context) error {
		return c.readyNow(ctx, node, "quantykube")
	})
	if after := c.containerIDs(t, selector, node); after != before {
		t.Fatalf("containers changed across kill -9 of the runtime:\nbefore %s\nafter  %s", before, after)
	}
	pods := c.podsRunOn(t, selector, node, "quantykube", len(strings.Fields(before)))
	c.streams(t, pods[0])
	t.Logf("kill -9 of quantykube runtime (pid %s): containers kept running (%s), node stayed Ready", pid, before)
}

func (c *cluster) nodeOK(node string, args ...string) bool {
	_, err := c.node(node, args...)
	return err == nil
}

// containerIDs lists "pod/containerID:restarts" of the pods on node, sorted.
func (c *cluster) containerIDs(t *testing.T, selector, node string) string {
	t.Helper()
	list, err := c.cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range list.Items {
		for _, cs := range p.Status.ContainerStatuses {
			ids = append(ids, fmt.Sprintf("%s/%s:%d", p.Name, cs.ContainerID, cs.RestartCount))
		}
	}
	sort.Strings(ids)
	return strings.Join(ids, " ")
}
