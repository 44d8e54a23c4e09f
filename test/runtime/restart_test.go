package runtimee2e

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Timeouts of TestRestart: the container's first output, its log growing (the ticker
// writes every 0.2 s), the pod's web server answering.
const (
	startedTimeout = 30 * time.Second
	growTimeout    = 10 * time.Second
	webTimeout     = 5 * time.Second
)

// TestRestart: the runtime can die and come back without disturbing its pods. A pod (CNI
// network) runs a container logging a tick every 0.2 s and a web server; kill -9 of the
// runtime; the container still runs and logs, the web server answers on the pod IP; the
// runtime starts again and has recovered the pod (Ready, Running, exec, logs go on); the
// pod is removed and nothing is left behind.
func TestRestart(t *testing.T) {
	v := need(t, "QK_RUNC", "QK_CNI_PLUGINS")
	e := newEnv(t, v[0], v[1])
	e.startRuntime(t)
	c := e.dial(t)
	logs := t.TempDir()
	sb := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "restart", Namespace: "qk", Uid: "restart-uid"},
		LogDirectory: filepath.Join(logs, "logs"), Hostname: "restart"}
	ticker := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "ticker"},
		Image:   &runtimeapi.ImageSpec{Image: "registry.k8s.io/e2e-test-images/busybox:1.29-2"},
		Command: []string{"sh", "-c", "i=0; while true; echo tick $i; i=$((i+1)); do sleep 0.2; done"}, LogPath: "ticker.log"}
	web := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "web"},
		Image: &runtimeapi.ImageSpec{Image: "registry.k8s.io/e2e-test-images/nginx:1.14-2"}, LogPath: "web.log"}
	c.pull(t, ticker.Image.Image)
	c.pull(t, web.Image.Image)
	cx, cancel := ctx(callTimeout)
	defer cancel()
	r, err := c.RunPodSandbox(cx, &runtimeapi.RunPodSandboxRequest{Config: sb})
	must(t, err)
	pod := r.PodSandboxId
	cid := c.runContainer(t, pod, sb, ticker)
	c.runContainer(t, pod, sb, web)
	tickerLog := filepath.Join(logs, "logs", "ticker.log")
	eventually(t, "the ticker's first output", pollInterval, startedTimeout, func() bool { return lines(tickerLog) > 0 })
	pid := c.pid(t, cid)
	if pid == 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("no container pid (%d)", pid)
	}
	st, err := c.PodSandboxStatus(cx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: pod})
	must(t, err)
	ip := st.Status.GetNetwork().GetIp()
	t.Logf("pod %s ip %s, container %s pid %d", pod, ip, cid, pid)

	t.Log("kill -9 the runtime")
	e.killRuntime()
	before := lines(tickerLog)
	eventually(t, "the container logging while the runtime is down", pollInterval, growTimeout, func() bool { return lines(tickerLog) > before })
	after := lines(tickerLog)
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("container died with the runtime")
	}
	if body, err := get(ip, webTimeout); err != nil || !strings.Contains(body, "nginx") {
		t.Fatalf("pod's web server at %s:80 unreachable while the runtime was down: %v %q", ip, err, body)
	}

	t.Log("restart the runtime")
	e.startRuntime(t)
	checkRecovered(t, c, pod, cid)
	eventually(t, "the log going on after the restart", pollInterval, growTimeout, func() bool { return lines(tickerLog) > after })
	if m := lastMessage(tickerLog); !strings.HasPrefix(m, "tick ") {
		t.Fatalf("last log line after restart: %q", m)
	}
	n := lines(tickerLog)

	t.Log("remove the pod")
	_, err = c.StopPodSandbox(cx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod})
	must(t, err)
	_, err = c.RemovePodSandbox(cx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: pod})
	must(t, err)
	if syscall.Kill(pid, 0) == nil {
		t.Fatal("container still running after pod removal")
	}
	if l := e.leaks(t, c); len(l) > 0 {
		t.Fatalf("left behind: %s", strings.Join(l, ", "))
	}
	t.Logf("restart test: PASS (container pid %d survived kill -9 of the runtime; %d log lines; nothing left behind)", pid, n)
}

// checkRecovered: the restarted runtime reports the pod Ready, the container Running,
// and can exec in it.
func checkRecovered(t *testing.T, c *cri, pod, cid string) {
	t.Helper()
	cx, cancel := ctx(callTimeout)
	defer cancel()
	st, err := c.PodSandboxStatus(cx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: pod})
	must(t, err)
	if st.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("sandbox %v after restart", st.Status.State)
	}
	if s := c.containerState(t, cid); s != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container %v after restart", s)
	}
	if out := strings.TrimSpace(c.exec(t, cid, "echo", "alive")); out != "alive" {
		t.Fatalf("exec after restart: %q", out)
	}
}

// get sends "GET / HTTP/1.0" to ip:80 and returns the whole answer.
func get(ip string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "80"), timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprint(conn, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	return string(b), err
}
