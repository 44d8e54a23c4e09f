package runtimee2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Times of TestKubelet: the static pod reaching Running, its log's first CRI line, the
// runtime's outage, how long kubelet is watched for restarts afterwards, the pod's removal.
const (
	podRunningTimeout = 120 * time.Second
	logLineTimeout    = 30 * time.Second
	outage            = 10 * time.Second
	observeAfter      = 15 * time.Second
	podRemovedTimeout = 150 * time.Second
	kubeletPoll       = time.Second
)

// kubeletCgroupRoot is kubelet's own cgroup root (its pods go below it).
const kubeletCgroupRoot = "qkcrit-kubelet"

const staticPod = `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: web
    image: registry.k8s.io/e2e-test-images/nginx:1.14-2
  - name: ticker
    image: registry.k8s.io/e2e-test-images/busybox:1.29-2
    command: ["sh", "-c", "trap 'exit 0' TERM; i=0; while true; do echo tick $i; i=$((i+1)); sleep 1; done"]
`

// criLogLine is a CRI-format log line of the ticker.
var criLogLine = regexp.MustCompile(`(?m)^[0-9T:.-]+Z stdout F tick [0-9]+$`)

// TestKubelet: a real kubelet v1.36.3 (standalone: no API server) runs a static pod on the
// runtime: both containers reach Running, the log is in CRI format, exec works, a 10 s
// kill -9 outage of the runtime restarts no container, removing the manifest removes the
// pod, and nothing is left behind.
func TestKubelet(t *testing.T) {
	v := need(t, "QK_RUNC", "QK_CNI_PLUGINS", "QK_KUBELET")
	e := newEnv(t, v[0], v[1])
	e.startRuntime(t)
	c := e.dial(t)
	k := e.startKubelet(t, v[2])
	if err := os.WriteFile(filepath.Join(k.root, "web.yaml.tmp"), []byte(staticPod), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, os.Rename(filepath.Join(k.root, "web.yaml.tmp"), filepath.Join(k.root, "manifests", "web.yaml")))

	t.Log("waiting for the static pod's two containers")
	eventually(t, "the static pod Running (see "+k.log+")", kubeletPoll, podRunningTimeout, func() bool {
		if k.p.exited() {
			t.Fatalf("kubelet exited: see %s\n%s", k.log, tail(k.log, 20))
		}
		return len(c.running(t)) == 2
	})
	before := ids(c.running(t))
	tickerID := ""
	for _, ctr := range c.running(t) {
		if ctr.Metadata.Name == "ticker" {
			tickerID = ctr.Id
		}
	}
	eventually(t, "a CRI-format line in the ticker's log", pollInterval, logLineTimeout, func() bool {
		logs, _ := filepath.Glob(filepath.Join(k.root, "logs", "default_web-qkcrit_*", "ticker", "0.log"))
		for _, l := range logs {
			if b, _ := os.ReadFile(l); criLogLine.Match(b) {
				return true
			}
		}
		return false
	})
	if out := c.exec(t, tickerID, "wget", "-qO-", "http://127.0.0.1:80/"); !strings.Contains(out, "nginx") {
		t.Fatalf("exec wget to the pod's web server: %q", out)
	}

	t.Logf("kill -9 the runtime for %s", outage)
	e.killRuntime()
	time.Sleep(outage) // the outage itself, not a wait for a condition
	e.startRuntime(t)
	watchUnchanged(t, c, before)
	if n := len(c.running(t)); n != 2 {
		t.Fatalf("%d containers Running after the runtime restart", n)
	}

	t.Log("remove the manifest")
	must(t, os.Remove(filepath.Join(k.root, "manifests", "web.yaml")))
	eventually(t, "kubelet removing the sandbox", kubeletPoll, podRemovedTimeout, func() bool {
		cx, cancel := ctx(callTimeout)
		defer cancel()
		r, err := c.ListPodSandbox(cx, &runtimeapi.ListPodSandboxRequest{})
		return err == nil && len(r.Items) == 0
	})
	if l := e.leaks(t, c); len(l) > 0 {
		t.Fatalf("left behind: %s", strings.Join(l, ", "))
	}
	t.Logf("kubelet test: PASS (static pod ran, logs/exec worked, containers [%s] survived kill -9 of the runtime, nothing left behind)", before)
}

// watchUnchanged fails as soon as the running containers differ from want during
// observeAfter after the restart (kubelet restarting or replacing one).
func watchUnchanged(t *testing.T, c *cri, want string) {
	t.Helper()
	cx, cancel := ctx(observeAfter)
	defer cancel()
	err := wait.PollUntilContextCancel(cx, kubeletPoll, true, func(context.Context) (bool, error) {
		if got := ids(c.running(t)); got != want {
			return false, fmt.Errorf("containers changed across the runtime restart: [%s] -> [%s]", want, got)
		}
		return false, nil
	})
	if !wait.Interrupted(err) {
		t.Fatal(err)
	}
}

// kubelet is a standalone kubelet with its root, pod logs and manifests under root.
type kubelet struct {
	root, log string
	p         *proc
}

// startKubelet writes kubelet's configuration (its own cgroup root, ports 10350/10351 on
// 127.0.0.1, the runtime's socket) and starts it; its cleanup removes what it made.
func (e *env) startKubelet(t *testing.T, bin string) *kubelet {
	t.Helper()
	k := &kubelet{root: filepath.Join(e.work, "kubelet"), log: filepath.Join(e.work, "kubelet.log")}
	t.Cleanup(func() { k.cleanup(t, e) })
	for _, d := range []string{"manifests", "root", "logs"} {
		must(t, os.MkdirAll(filepath.Join(k.root, d), 0o755))
	}
	makeKubeletCgroups(t)
	cfg := fmt.Sprintf(kubeletConfig, filepath.Join(k.root, "manifests"), filepath.Join(k.root, "logs"), e.socket(), e.socket(), kubeletCgroupRoot)
	must(t, os.WriteFile(filepath.Join(k.root, "config.yaml"), []byte(cfg), 0o644))
	must(t, os.WriteFile(k.log, nil, 0o644))
	k.p = start(t, k.log, bin, "--config", filepath.Join(k.root, "config.yaml"), "--root-dir", filepath.Join(k.root, "root"),
		"--hostname-override", "qkcrit", "--v=2")
	return k
}

const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %s
podLogsDir: %s
containerRuntimeEndpoint: unix://%s
imageServiceEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupRoot: /%s
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
address: 127.0.0.1
port: 10350
readOnlyPort: 0
healthzPort: 10351
healthzBindAddress: 127.0.0.1
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
enforceNodeAllocatable: []
localStorageCapacityIsolation: false
makeIPTablesUtilChains: false
syncFrequency: 5s
fileCheckFrequency: 2s
`

// makeKubeletCgroups creates kubelet's cgroup root in every hierarchy (cpuset with the
// root's cpus and mems, which a new cpuset cgroup lacks).
func makeKubeletCgroups(t *testing.T) {
	t.Helper()
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	for _, ent := range ents {
		if ent.IsDir() && ent.Type()&os.ModeSymlink == 0 {
			must(t, os.MkdirAll(filepath.Join("/sys/fs/cgroup", ent.Name(), kubeletCgroupRoot), 0o755))
		}
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", f)); err == nil {
			os.WriteFile(filepath.Join("/sys/fs/cgroup/cpuset", kubeletCgroupRoot, f), b, 0o644)
		}
	}
}

// cleanup stops kubelet, removes the pods and the runtime's state (env.cleanup), then
// kubelet's mounts, directories and cgroups.
func (k *kubelet) cleanup(t *testing.T, e *env) {
	k.p.stop(syscall.SIGTERM)
	e.cleanup(t)
	for _, m := range e.ourMounts(k.root) {
		unix.Unmount(m, unix.MNT_DETACH)
	}
	os.RemoveAll(k.root)
	for _, d := range cgroupDirs(kubeletCgroupRoot, 0) {
		syscall.Rmdir(d)
	}
}
