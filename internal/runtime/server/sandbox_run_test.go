package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestRunPodSandbox(t *testing.T) {
	e := newTestEnv(t)
	id := e.runPod(t, "web")
	sb, err := e.sandboxes.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	if !sb.Ready || sb.IP != "10.9.0.2" || !sb.NetworkSetUp || sb.PausePid == 0 || e.sandboxState(sb) != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("sandbox %+v", sb)
	}
	dir := e.sandboxes.RecordDir(id)
	want := []string{"netns " + sb.NetNS, "overlay " + filepath.Join(dir, "rootfs"), "shm " + filepath.Join(dir, "shm")}
	if got := e.fs.mounted(); !slices.Equal(got, want) {
		t.Fatalf("mounts %v, want %v", got, want)
	}
	for _, f := range []string{"config.json", "hosts", "hostname", "resolv.conf"} {
		if !fileExists(filepath.Join(dir, f)) {
			t.Errorf("%s missing", f)
		}
	}
	if got := e.j.made("runc.Start"); !slices.Equal(got, []string{"runc.Start " + id}) {
		t.Fatalf("runc start calls %v", got)
	}
	if e.mon.last.Bundle != dir || e.mon.last.Dir != dir || e.mon.last.LogPath != "" {
		t.Fatalf("monitor options %+v", e.mon.last)
	}
}

func TestRunPodSandboxHostNetwork(t *testing.T) {
	e := newTestEnv(t)
	cfg := podConfig("host")
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Ipc: runtimeapi.NamespaceMode_NODE}}}
	r, err := e.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if n := e.j.made("cni."); len(n) != 0 {
		t.Fatalf("CNI called for a host-network pod: %v", n)
	}
	sb, _ := e.sandboxes.Get(r.PodSandboxId)
	if sb.NetNS != "" || sb.NetworkSetUp || len(e.fs.mounted()) != 1 {
		t.Fatalf("sandbox %+v mounts %v", sb, e.fs.mounted())
	}
}

// Every failure of RunPodSandbox undoes everything made so far, in reverse, and frees
// the name for a retry.
func TestRunPodSandboxFailureUndoesEverything(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		method string
		// undone are calls the undo must make (the DEL after a failed ADD, the runc delete
		// of a created pause).
		undone []string
	}{
		{"fs.CreateNetNS", nil},
		{"cni.Setup", []string{"cni.Teardown", "fs.RemoveNetNS"}},
		{"fs.MountShm", []string{"cni.Teardown", "fs.RemoveNetNS"}},
		{"fs.MountOverlay", []string{"cni.Teardown"}},
		{"monitor.Spawn", []string{"fs.Unmount", "cni.Teardown"}},
		{"runc.Start", []string{"runc.Delete", "fs.Unmount", "cni.Teardown"}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			e := newTestEnv(t)
			e.j.fail(tc.method, boom)
			_, err := e.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig("web")})
			if err == nil || status.Code(err) != codes.Unknown {
				t.Fatalf("err %v", err)
			}
			for _, call := range tc.undone {
				if len(e.j.made(call)) == 0 {
					t.Errorf("%s not undone by %s (calls %v)", call, tc.method, e.j.calls)
				}
			}
			expectNothingLeft(t, e)
			if len(e.sandboxes.List()) != 0 {
				t.Fatal("a record was kept")
			}
			e.j.fail(tc.method, nil)
			e.runPod(t, "web") // the name was released
		})
	}
}

func TestRunPodSandboxCNIAddFailure(t *testing.T) {
	e := newTestEnv(t)
	e.j.fail("cni.Setup", errors.New("plugin bridge: no IP addresses available"))
	_, err := e.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig("web")})
	if err == nil || status.Convert(err).Message() != "plugin bridge: no IP addresses available" {
		t.Fatalf("err %v", err)
	}
	// DEL releases what ADD may have allocated, then the namespace goes.
	calls := e.j.made("")
	del, unpin := indexPrefix(calls, "cni.Teardown "), indexPrefix(calls, "fs.RemoveNetNS ")
	if del < 0 || unpin < del || calls[del] != "cni.Teardown "+calls[indexPrefix(calls, "cni.Setup ")][len("cni.Setup "):] {
		t.Fatalf("want CNI DEL then netns removal, calls %v", calls)
	}
	if len(e.j.made("monitor.")) != 0 || len(e.j.made("fs.MountOverlay")) != 0 {
		t.Fatalf("went on after ADD failed: %v", calls)
	}
	expectNothingLeft(t, e)
}

// indexPrefix is the index of the first call starting with prefix, or -1.
func indexPrefix(calls []string, prefix string) int {
	return slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, prefix) })
}

func TestRunPodSandboxRefusals(t *testing.T) {
	e := newTestEnv(t)
	for _, r := range []*runtimeapi.RunPodSandboxRequest{
		{Config: &runtimeapi.PodSandboxConfig{}},
		{Config: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "a", Namespace: "b"}}},
		{Config: podConfig("a"), RuntimeHandler: "kata"},
	} {
		if _, err := e.RunPodSandbox(context.Background(), r); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: err %v", r, err)
		}
	}
	if len(e.j.calls) != 0 {
		t.Fatalf("refused requests reached the host: %v", e.j.calls)
	}
	e.runPod(t, "dup")
	if _, err := e.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig("dup")}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("second sandbox of one name: %v", err)
	}
}

func TestRunPodSandboxPullsThePauseImage(t *testing.T) {
	e := newTestEnv(t)
	e.cfg.PauseImage = "registry.k8s.io/pause:missing"
	e.Service.cfg.PauseImage = e.cfg.PauseImage
	_, err := e.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: podConfig("web")})
	if status.Code(err) != codes.NotFound || len(e.j.made("images.Pull registry.k8s.io/pause:missing")) != 1 {
		t.Fatalf("err %v calls %v", err, e.j.calls)
	}
	expectNothingLeft(t, e)
	if _, err := os.Stat(e.sandboxes.Dir); err != nil {
		t.Fatal(err)
	}
}
