package runtimee2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// callTimeout bounds one CRI call of the tests (pulls included: the registry is local).
const callTimeout = 2 * time.Minute

func (c *cri) pull(t *testing.T, image string) {
	t.Helper()
	cx, cancel := ctx(callTimeout)
	defer cancel()
	_, err := c.PullImage(cx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	must(t, err)
}

// runContainer creates and starts a container of cfg in pod.
func (c *cri) runContainer(t *testing.T, pod string, sb *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) string {
	t.Helper()
	cx, cancel := ctx(callTimeout)
	defer cancel()
	r, err := c.CreateContainer(cx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg, SandboxConfig: sb})
	must(t, err)
	_, err = c.StartContainer(cx, &runtimeapi.StartContainerRequest{ContainerId: r.ContainerId})
	must(t, err)
	return r.ContainerId
}

// pid is the container's init pid from its verbose status (crictl inspect's "pid").
func (c *cri) pid(t *testing.T, id string) int {
	t.Helper()
	cx, cancel := ctx(callTimeout)
	defer cancel()
	st, err := c.ContainerStatus(cx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	must(t, err)
	var info struct{ Pid int }
	must(t, json.Unmarshal([]byte(st.Info["info"]), &info))
	return info.Pid
}

func (c *cri) containerState(t *testing.T, id string) runtimeapi.ContainerState {
	t.Helper()
	cx, cancel := ctx(callTimeout)
	defer cancel()
	st, err := c.ContainerStatus(cx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	must(t, err)
	return st.Status.State
}

func (c *cri) exec(t *testing.T, id string, cmd ...string) string {
	t.Helper()
	cx, cancel := ctx(callTimeout)
	defer cancel()
	r, err := c.ExecSync(cx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 30})
	must(t, err)
	if r.ExitCode != 0 {
		t.Fatalf("exec %v in %s: exit %d: %s", cmd, id, r.ExitCode, r.Stderr)
	}
	return string(r.Stdout)
}

// running lists the running containers (crictl ps -q), sorted by ID.
func (c *cri) running(t *testing.T) []*runtimeapi.Container {
	t.Helper()
	cx, cancel := ctx(callTimeout)
	defer cancel()
	r, err := c.ListContainers(cx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		return nil
	}
	return r.Containers
}

func ids(cs []*runtimeapi.Container) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Id)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// lines counts the lines of a file (0 when missing).
func lines(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
	}
	return n
}

// lastMessage is the message of the last line of a CRI log ("<time> <stream> <tag> <msg>").
func lastMessage(path string) string {
	b, _ := os.ReadFile(path)
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if f := strings.SplitN(ls[len(ls)-1], " ", 4); len(f) == 4 {
		return f[3]
	}
	return ""
}

// eventually polls cond every interval until it holds, failing the test after timeout.
func eventually(t *testing.T, what string, interval, timeout time.Duration, cond func() bool) {
	t.Helper()
	cx, cancel := ctx(timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(cx, interval, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("%s: not within %s", what, timeout)
	}
}
