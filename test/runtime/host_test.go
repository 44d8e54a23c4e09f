package runtimee2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// monitorsGoneTimeout bounds the monitors' ending after their containers were killed.
const monitorsGoneTimeout = 5 * time.Second

// leaks lists what pods left behind (empty: nothing), the checks of lib.sh's qk_leaks:
// sandboxes, netns, mounts, cgroups, CNI IP allocations, writable layers, monitors and
// portmap chains.
func (e *env) leaks(t *testing.T, c *cri) []string {
	t.Helper()
	var out []string
	count := func(n int, what string) {
		if n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, what))
		}
	}
	cx, cancel := ctx(10 * time.Second)
	defer cancel()
	pods, err := c.ListPodSandbox(cx, &runtimeapi.ListPodSandboxRequest{})
	must(t, err)
	count(len(pods.Items), "sandboxes")
	count(len(entries(filepath.Join(e.run, "state", "netns"))), "netns")
	count(len(e.ourMounts(e.run, filepath.Join(e.work, "root"))), "mounts")
	count(len(cgroupDirs(cgroupParent, 1)), "cgroups")
	count(len(globFiles(filepath.Join(e.run, "ipam"), "10.*")), "CNI IP allocations")
	count(len(entries(filepath.Join(e.work, "root", "rw"))), "writable layers")
	count(len(e.monitors()), "monitor processes")
	chains, _ := exec.Command("iptables", "-t", "nat", "-S").Output()
	count(strings.Count(string(chains), "-N CNI-DN-"), "portmap chains")
	return out
}

func entries(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func globFiles(dir, pattern string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if ok, _ := filepath.Match(pattern, d.Name()); ok {
				out = append(out, p)
			}
		}
		return nil
	})
	return out
}

// ourMounts are the mount points below any of dirs, deepest first.
func (e *env) ourMounts(dirs ...string) []string {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		for _, d := range dirs {
			if strings.Contains(line, " "+d+"/") {
				if fields := strings.Fields(line); len(fields) > 1 {
					out = append(out, fields[1])
				}
				break
			}
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}

// cgroupDirs are the directories below /sys/fs/cgroup/*/name at least minDepth deep,
// deepest first.
func cgroupDirs(name string, minDepth int) []string {
	var out []string
	tops, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", name))
	for _, top := range tops {
		filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && strings.Count(strings.TrimPrefix(p, top), "/") >= minDepth {
				out = append(out, p)
			}
			return nil
		})
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// monitors are the pids of monitor processes of this state dir ("--dir RUN/state/").
func (e *env) monitors() []int {
	mark := "--dir " + filepath.Join(e.run, "state") + "/"
	var out []int
	for _, name := range entries("/proc") {
		var pid int
		if _, err := fmt.Sscanf(name, "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", name, "cmdline"))
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), mark) {
			out = append(out, pid)
		}
	}
	return out
}

// cleanup removes what lib.sh's qk_cleanup removes: pods (through the runtime when it
// serves), containers runc still has, mounts below the state dirs, the bridge, the cgroups
// and the state. It touches nothing that is not the tests' own.
func (e *env) cleanup(t *testing.T) {
	if _, err := os.Stat(e.socket()); err == nil {
		if c, err := dialCRI(e.socket()); err == nil {
			e.removePods(c)
			c.conn.Close()
		}
	}
	e.rt.stop(syscall.SIGTERM)
	e.rt = nil
	runcRoot := filepath.Join(e.run, "runc")
	if out, err := exec.Command(e.runc, "--root", runcRoot, "list", "-q").Output(); err == nil {
		for _, id := range strings.Fields(string(out)) {
			exec.Command(e.runc, "--root", runcRoot, "kill", "--all", id, "KILL").Run()
			exec.Command(e.runc, "--root", runcRoot, "delete", "--force", id).Run()
		}
		c, cancel := ctx(monitorsGoneTimeout)
		wait.PollUntilContextCancel(c, pollInterval, true, func(context.Context) (bool, error) { return len(e.monitors()) == 0, nil })
		cancel()
	}
	for _, m := range e.ourMounts(e.run, filepath.Join(e.work, "root")) {
		unix.Unmount(m, unix.MNT_DETACH)
	}
	exec.Command("ip", "link", "del", bridge).Run()
	for _, d := range cgroupDirs(cgroupParent, 0) {
		syscall.Rmdir(d)
	}
	os.RemoveAll(e.run)
	os.RemoveAll(filepath.Join(e.work, "root"))
	e.restoreIPForward(t)
}

// ipForward is the host's IPv4 forwarding switch, which the bridge plugin
// (isGateway) turns on; ipForwardSaved is where its value before the tests'
// first pod is kept (lib.sh's file: a crashed run's is restored by the next
// cleanup, whichever harness runs it).
const ipForward = "/proc/sys/net/ipv4/ip_forward"

func (e *env) ipForwardSaved() string { return filepath.Join(e.work, "ip_forward.orig") }

// saveIPForward records the host's IPv4 forwarding before the first pod.
func (e *env) saveIPForward(t *testing.T) {
	b, err := os.ReadFile(ipForward)
	must(t, err)
	must(t, os.WriteFile(e.ipForwardSaved(), b, 0o644))
}

// restoreIPForward puts the host's IPv4 forwarding back as saveIPForward
// found it; writing it resets every interface's forwarding and
// all.accept_redirects to match, as they were.
func (e *env) restoreIPForward(t *testing.T) {
	b, err := os.ReadFile(e.ipForwardSaved())
	if err != nil {
		return
	}
	if err := os.WriteFile(ipForward, []byte(strings.TrimSpace(string(b))+"\n"), 0o644); err != nil {
		t.Errorf("put the host's IPv4 forwarding back to %s: %v", strings.TrimSpace(string(b)), err)
		return
	}
	os.Remove(e.ipForwardSaved())
}

// removePods stops and removes every sandbox (crictl rmp -fa).
func (e *env) removePods(c *cri) {
	cx, cancel := ctx(time.Minute)
	defer cancel()
	pods, err := c.ListPodSandbox(cx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		c.StopPodSandbox(cx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.Id})
		c.RemovePodSandbox(cx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id})
	}
}
