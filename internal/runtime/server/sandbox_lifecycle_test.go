package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestStopPodSandbox(t *testing.T) {
	e := newTestEnv(t)
	id := e.running(t)
	c, _ := e.containers.Get(id)
	pod := c.SandboxID
	e.j.fail("cni.Teardown", errors.New("plugin portmap: iptables busy"))
	if _, err := e.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod}); err == nil {
		t.Fatal("a failed CNI DEL was ignored")
	}
	if sb, _ := e.sandboxes.Get(pod); !sb.NetworkSetUp {
		t.Fatal("network marked down although DEL failed: a retry would skip it")
	}
	e.j.fail("cni.Teardown", nil)
	if _, err := e.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod}); err != nil {
		t.Fatal(err)
	}
	sb, _ := e.sandboxes.Get(pod)
	if sb.Ready || sb.NetworkSetUp || e.sandboxState(sb) != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("sandbox %+v", sb)
	}
	if st := e.state(t, id); st != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("container %v", st)
	}
	e.j.reset()
	if _, err := e.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod}); err != nil || len(e.j.made("cni.")) != 0 {
		t.Fatalf("second stop: %v, calls %v", err, e.j.calls)
	}
}

func TestRemovePodSandbox(t *testing.T) {
	e := newTestEnv(t)
	id := e.running(t)
	c, _ := e.containers.Get(id)
	if _, err := e.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: c.SandboxID}); err != nil {
		t.Fatal(err)
	}
	expectNothingLeft(t, e)
	if len(e.sandboxes.List()) != 0 || len(e.containers.List()) != 0 {
		t.Fatal("records kept")
	}
	if _, err := e.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: c.SandboxID}); err != nil {
		t.Fatalf("second remove: %v", err)
	}
}

// A create that crashed before its record was written is removed on start: runc's
// container, the CNI allocation, mounts and files.
func TestRecoverRemovesIncompleteCreates(t *testing.T) {
	e := newTestEnv(t)
	sbID, ctrID := newID(), newID()
	ns := filepath.Join(e.cfg.StateDir, "netns", sbID)
	for _, d := range []string{e.sandboxes.RecordDir(sbID), e.containers.RecordDir(ctrID), filepath.Join(e.cfg.RootDir, "rw", ctrID)} {
		os.MkdirAll(d, 0o755)
	}
	e.fs.CreateNetNS(ns)
	e.fs.mount("overlay", filepath.Join(e.containers.RecordDir(ctrID), "rootfs"))
	e.j.reset()
	if err := e.recover(); err != nil {
		t.Fatal(err)
	}
	for _, call := range []string{"runc.Delete " + sbID + " true", "cni.Teardown " + sbID, "fs.RemoveNetNS " + ns, "runc.Delete " + ctrID + " true"} {
		if len(e.j.made(call)) != 1 {
			t.Errorf("no %q (calls %v)", call, e.j.calls)
		}
	}
	expectNothingLeft(t, e)
}
