package noderuntime

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// measure is true when QK_NR_MEASURE=1: TestPodRestartPrepull then runs
// three rounds of each case and the control-plane node too (about 10
// minutes), for docs/benchmarks.md; CI runs one round on the worker.
var measure = os.Getenv("QK_NR_MEASURE") == "1"

// TestPodRestartPrepull measures what install runtime's prepull saves: the
// time from the kubelet's start on quantykube runtime until the node's
// DaemonSet pod (on the worker) or its four static pods (on the control
// plane, QK_NR_MEASURE=1 only) run Ready there, once with the prepull and
// once with --no-prepull, where the images come from the harness's
// registry. Each run starts with quantykube runtime's root dir empty, so
// the --no-prepull run really pulls. It logs "figure:" lines and asserts
// only correctness: the pods run, the node is Ready, undo brings it back.
func TestPodRestartPrepull(t *testing.T) {
	c := setup(t)
	rounds := 1
	if measure {
		rounds = 3
	}
	w := c.worker
	c.onContainerd(t, w)
	func() {
		defer c.quiet(t, w)()
		c.workload(t, w, 1)
		defer c.deleteWorkload(t)
		c.podsRunOn(t, "app=nr-agent", w, "containerd", 1)
		c.drain(t, w)
		defer c.kubectl(t, "uncordon", w)
		if out := c.mustNode(t, w, "quantykube", "install", "runtime", "--dry-run", "--no-prepull"); !strings.Contains(out, "skipped (--no-prepull)") {
			t.Fatalf("the dry run does not say the prepull is skipped:\n%s", out)
		}
		agent := func(ctx context.Context) ([]corev1.Pod, error) {
			l, err := c.cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=nr-agent", FieldSelector: "spec.nodeName=" + w})
			if err != nil {
				return nil, err
			}
			return l.Items, nil
		}
		back := func(t *testing.T) { c.podsRunOn(t, "app=nr-agent", w, "containerd", 1) }
		c.restartRounds(t, w, "worker DaemonSet pod", agent, 1, rounds, back)
	}()
	if !measure {
		t.Log("control-plane node not measured: set QK_NR_MEASURE=1 (about 7 minutes more)")
		return
	}
	cp := c.cp
	c.onContainerd(t, cp)
	defer c.quiet(t, cp)()
	c.drain(t, cp)
	defer c.kubectl(t, "uncordon", cp)
	static := func(ctx context.Context) ([]corev1.Pod, error) {
		var out []corev1.Pod
		for _, p := range staticPods {
			pod, err := c.cs.CoreV1().Pods("kube-system").Get(ctx, p+"-"+cp, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			out = append(out, *pod)
		}
		return out, nil
	}
	c.restartRounds(t, cp, "control-plane static pods", static, len(staticPods), rounds, func(t *testing.T) { c.staticPodsOn(t, "containerd") })
}

var staticPods = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// restartRounds moves the drained node onto quantykube runtime and back
// rounds times with the prepull and rounds times with --no-prepull, and
// logs each pod restart time and the medians. back waits for the pods on
// containerd again after each undo.
func (c *cluster) restartRounds(t *testing.T, node, what string, pods podLister, want, rounds int, back func(*testing.T)) {
	t.Helper()
	cases := []struct {
		name string
		args []string
	}{
		{"prepull", []string{"quantykube", "install", "runtime"}},
		{"no-prepull", []string{"quantykube", "install", "runtime", "--no-prepull"}},
	}
	for _, cs := range cases {
		var fromKubelet, fromReturn []time.Duration
		for i := 1; i <= rounds; i++ {
			r := c.restartOnce(t, node, cs.args, pods, want)
			t.Logf("figure: %s %s on %s run %d/%d: restart %v from the kubelet's start, %v after install returned; install took %v",
				what, cs.name, node, i, rounds, r.fromKubelet.Round(time.Millisecond), r.fromReturn.Round(time.Millisecond), r.install.Round(time.Millisecond))
			fromKubelet, fromReturn = append(fromKubelet, r.fromKubelet), append(fromReturn, r.fromReturn)
			c.mustNode(t, node, "quantykube", "undo", "runtime")
			c.readyOn(t, node, "containerd")
			back(t)
		}
		t.Logf("figure: %s %s on %s median of %d: restart %v from the kubelet's start, %v after install returned",
			what, cs.name, node, rounds, median(fromKubelet).Round(time.Millisecond), median(fromReturn).Round(time.Millisecond))
	}
}

// podLister returns the pods whose restart is measured.
type podLister func(context.Context) ([]corev1.Pod, error)

type restartTimes struct{ fromKubelet, fromReturn, install time.Duration }

// restartOnce empties quantykube runtime's root dir, runs the install
// (args) on node and times the pods' restart: from the kubelet's start (its
// unit's ExecMainStartTimestamp, the node shares the host's clock) until the
// API first shows every pod Running with all containers Ready on
// quantykube runtime (polled every 100 ms from before the install).
func (c *cluster) restartOnce(t *testing.T, node string, args []string, pods podLister, want int) restartTimes {
	t.Helper()
	c.clearRuntimeRoot(t, node)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ready := c.whenRunning(ctx, pods, "quantykube", want)
	start := time.Now()
	out := c.mustNode(t, node, args...)
	returned := time.Now()
	if slices.Contains(args, "--no-prepull") && !strings.Contains(out, "skipped (--no-prepull)") {
		t.Fatalf("install --no-prepull did not skip the prepull:\n%s", out)
	}
	kubelet := c.kubeletStart(t, node)
	if kubelet.Before(start) || kubelet.After(returned) {
		t.Fatalf("the kubelet on %s started at %v, not during the install (%v to %v)", node, kubelet, start, returned)
	}
	var at time.Time
	select {
	case at = <-ready:
	case <-ctx.Done():
		t.Fatalf("%d pods not running on quantykube runtime on %s: %v\ninstall said:\n%s", want, node, ctx.Err(), out)
	}
	c.readyOn(t, node, "quantykube")
	if slices.Contains(args, "--no-prepull") {
		c.logPulls(t, pods, start)
	}
	return restartTimes{fromKubelet: at.Sub(kubelet), fromReturn: max(0, at.Sub(returned)), install: returned.Sub(start)}
}

// whenRunning polls pods every 100 ms and sends the first time all want of
// them run with every container Ready on runtime. Errors (the API server
// restarting on a control-plane node) are polled through.
func (c *cluster) whenRunning(ctx context.Context, pods podLister, runtime string, want int) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		for ctx.Err() == nil {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			list, err := pods(rctx)
			cancel()
			if err == nil && podsRunning(list, runtime, want) {
				ch <- time.Now()
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return ch
}

func podsRunning(pods []corev1.Pod, runtime string, want int) bool {
	n := 0
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		for _, cs := range p.Status.ContainerStatuses {
			if !cs.Ready || !strings.HasPrefix(cs.ContainerID, runtime+"://") {
				return false
			}
		}
		n++
	}
	return n == want
}

// kubeletStart is when the node's kubelet unit last started its process.
func (c *cluster) kubeletStart(t *testing.T, node string) time.Time {
	t.Helper()
	out := strings.TrimSpace(c.mustNode(t, node, "systemctl", "show", "kubelet", "-P", "ExecMainStartTimestamp", "--timestamp=us+utc"))
	at, err := time.Parse("Mon 2006-01-02 15:04:05.000000 MST", out)
	if err != nil {
		t.Fatalf("the kubelet's start time on %s: %v", node, err)
	}
	return at
}

// clearRuntimeRoot empties quantykube runtime's root dir on node (its image
// store and layers): undo stops the runtime but keeps the dir, so without
// this the next install would find every image already there. The runtime
// must be stopped and nothing mounted below the dir.
func (c *cluster) clearRuntimeRoot(t *testing.T, node string) {
	t.Helper()
	if c.nodeOK(node, "systemctl", "is-active", "quantykube-runtime") {
		t.Fatalf("quantykube-runtime is active on %s: its root dir cannot be emptied", node)
	}
	c.mustNode(t, node, "sh", "-c", `d=/var/lib/quantykube/runtime
		if grep " $d/" /proc/mounts; then echo "mounted below $d"; exit 1; fi
		find "$d" -mindepth 1 -delete && test -z "$(ls -A "$d")"`)
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// logPulls logs the kubelet's "Successfully pulled" events of pods since
// start (events can be lost while the API server restarts: not asserted).
func (c *cluster) logPulls(t *testing.T, pods podLister, since time.Time) {
	t.Helper()
	ctx := context.Background()
	list, err := pods(ctx)
	if err != nil {
		t.Logf("pull events: %v", err)
		return
	}
	for _, p := range list {
		evs, err := c.cs.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=Pulled,involvedObject.name=" + p.Name})
		if err != nil {
			t.Logf("pull events of %s: %v", p.Name, err)
			continue
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, "Successfully pulled") && !e.LastTimestamp.Time.Before(since.Truncate(time.Second)) {
				t.Logf("%s: %s", p.Name, e.Message)
			}
		}
	}
}
