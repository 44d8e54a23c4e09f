package server

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/cgroups"
	"github.com/quantyroot/quantykube/internal/runtime/config"
	"github.com/quantyroot/quantykube/internal/runtime/images"
	"github.com/quantyroot/quantykube/internal/runtime/monitor"
)

// testEnv is a Service on fakes (fakes_test.go) and temporary directories.
type testEnv struct {
	*Service
	j    *journal
	runc *fakeRunc
	mon  *fakeMonitors
	net  *fakeNetwork
	fs   *fakeFS
	img  *fakeImages
	cfg  config.Config
}

// testTimeouts are short: a fake monitor records an exit at once or never.
var testTimeouts = timeouts{exitRecorded: 200 * time.Millisecond, exitPoll: 5 * time.Millisecond, cniTeardown: time.Second}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	dir := t.TempDir()
	cfg := config.Default()
	cfg.StateDir, cfg.RootDir, cfg.RuncRoot = filepath.Join(dir, "state"), filepath.Join(dir, "root"), filepath.Join(dir, "runc")
	cfg.CgroupParent = "/qktest"
	j := newJournal()
	e := &testEnv{j: j, cfg: cfg, runc: &fakeRunc{j: j}, mon: &fakeMonitors{j: j}, net: &fakeNetwork{j: j, ips: []string{"10.9.0.2"}},
		fs:  &fakeFS{j: j, mounts: map[string]string{}},
		img: &fakeImages{j: j, root: filepath.Join(dir, "layers"), images: map[string]images.Image{}, config: map[string]*v1.ConfigFile{}}}
	e.img.add(cfg.PauseImage, v1.Config{Entrypoint: []string{"/pause"}}, "sha256:pause")
	e.img.add("busybox", v1.Config{Cmd: []string{"sh"}, StopSignal: "SIGQUIT"}, "sha256:l1", "sha256:l2")
	// By default a killed process exits at once and its monitor records it.
	e.runc.onKill = func(id string, _ syscall.Signal) { e.recordExit(t, id, 137) }
	s, err := newService(cfg, deps{runc: e.runc, monitors: e.mon, net: e.net, fs: e.fs, images: e.img,
		cg: cgroups.FS{Root: filepath.Join(dir, "cgroup")}}, testTimeouts)
	if err != nil {
		t.Fatal(err)
	}
	e.Service = s
	return e
}

// recordExit is the monitor of id (sandbox or container) recording its process's exit.
func (e *testEnv) recordExit(t *testing.T, id string, code int32) {
	t.Helper()
	for _, dir := range []string{e.containers.RecordDir(id), e.sandboxes.RecordDir(id)} {
		if fileExists(dir) {
			if err := monitor.WriteExit(dir, monitor.Exit{Code: code, FinishedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
}

func podConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "ns", Uid: name + "-uid"},
		Hostname: name, LogDirectory: "/var/log/pods/" + name}
}

func ctrConfig(name string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image: &runtimeapi.ImageSpec{Image: "busybox"}, LogPath: name + ".log"}
}

func (e *testEnv) runPod(t *testing.T, name string) string {
	t.Helper()
	r, err := e.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig(name)})
	if err != nil {
		t.Fatal(err)
	}
	return r.PodSandboxId
}

func (e *testEnv) createContainer(t *testing.T, pod, name string) string {
	t.Helper()
	r, err := e.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod,
		Config: ctrConfig(name), SandboxConfig: podConfig(name)})
	if err != nil {
		t.Fatal(err)
	}
	return r.ContainerId
}

// leftovers lists what the service holds on the host and on disk: mounts, pinned
// namespaces, record directories and writable layers. Empty means nothing is left.
func (e *testEnv) leftovers(t *testing.T) []string {
	t.Helper()
	out := e.fs.mounted()
	for _, d := range []string{filepath.Join(e.cfg.StateDir, "sandboxes"), filepath.Join(e.cfg.StateDir, "containers"),
		filepath.Join(e.cfg.StateDir, "netns"), filepath.Join(e.cfg.RootDir, "rw")} {
		ents, _ := os.ReadDir(d)
		for _, ent := range ents {
			out = append(out, filepath.Join(d, ent.Name()))
		}
	}
	return out
}

func expectNothingLeft(t *testing.T, e *testEnv) {
	t.Helper()
	if l := e.leftovers(t); len(l) > 0 {
		t.Fatalf("left behind: %v\ncalls: %v", l, e.j.calls)
	}
}
