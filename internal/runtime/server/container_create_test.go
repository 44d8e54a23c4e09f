package server

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestCreateContainer(t *testing.T) {
	e := newTestEnv(t)
	pod := e.runPod(t, "web")
	id := e.createContainer(t, pod, "app")
	c, err := e.containers.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	if e.containerState(c) != runtimeapi.ContainerState_CONTAINER_CREATED || c.Pid == 0 || c.User == nil {
		t.Fatalf("container %+v", c)
	}
	dir := e.containers.RecordDir(id)
	if e.mon.last.ID != id || e.mon.last.Bundle != dir || e.mon.last.LogPath != "/var/log/pods/web/app.log" {
		t.Fatalf("monitor options %+v", e.mon.last)
	}
	spec, err := readSpec(dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(spec.Process.Args, " ") != "sh" || spec.Hostname != "web" || spec.Linux.Resources.HugepageLimits != nil {
		t.Fatalf("spec %+v", spec.Process)
	}
	if !slices.Contains(e.fs.mounted(), "overlay "+filepath.Join(dir, "rootfs")) {
		t.Fatalf("mounts %v", e.fs.mounted())
	}
	if e.j.made("runc.Start "+id) != nil {
		t.Fatal("CreateContainer started the container")
	}
}

func TestCreateContainerFailureLeavesNothing(t *testing.T) {
	for _, method := range []string{"fs.MountOverlay", "monitor.Spawn"} {
		t.Run(method, func(t *testing.T) {
			e := newTestEnv(t)
			pod := e.runPod(t, "web")
			before := e.leftovers(t)
			e.j.fail(method, errors.New("boom"))
			_, err := e.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: ctrConfig("app")})
			if err == nil {
				t.Fatal("accepted")
			}
			if method == "monitor.Spawn" && status.Convert(err).Message() != "create container app: boom" {
				t.Fatalf("err %v", err)
			}
			if after := e.leftovers(t); !slices.Equal(after, before) {
				t.Fatalf("left behind: %v (before %v)", after, before)
			}
			e.j.fail(method, nil)
			e.createContainer(t, pod, "app")
		})
	}
}

func TestCreateContainerRefusals(t *testing.T) {
	e := newTestEnv(t)
	pod := e.runPod(t, "web")
	privileged := ctrConfig("priv")
	privileged.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{Privileged: true}}
	noImage := ctrConfig("x")
	noImage.Image = nil
	imageVolume := ctrConfig("v")
	imageVolume.Mounts = []*runtimeapi.Mount{{ContainerPath: "/v", Image: &runtimeapi.ImageSpec{Image: "busybox"}}}
	unknownImage := ctrConfig("u")
	unknownImage.Image = &runtimeapi.ImageSpec{Image: "nope"}
	before := e.leftovers(t)
	for _, tc := range []struct {
		pod  string
		cfg  *runtimeapi.ContainerConfig
		code codes.Code
		msg  string
	}{
		{pod, privileged, codes.InvalidArgument, "container priv: privileged container in a non-privileged sandbox: set privileged on the sandbox too"},
		{pod, noImage, codes.InvalidArgument, "container config needs an image"},
		{pod, &runtimeapi.ContainerConfig{Image: &runtimeapi.ImageSpec{Image: "busybox"}}, codes.InvalidArgument, "container config needs metadata with a name"},
		{pod, imageVolume, codes.Unimplemented, `image volumes (mount of image "busybox") are not supported yet`},
		{pod, unknownImage, codes.NotFound, `image "nope" not found`},
		{"nosuchpod", ctrConfig("a"), codes.NotFound, `sandbox "nosuchpod" not found`},
	} {
		_, err := e.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: tc.pod, Config: tc.cfg})
		if st := status.Convert(err); st.Code() != tc.code || st.Message() != tc.msg {
			t.Errorf("%s: %v, want %v %q", tc.cfg.GetMetadata().GetName(), err, tc.code, tc.msg)
		}
	}
	if after := e.leftovers(t); !slices.Equal(after, before) {
		t.Fatalf("left behind: %v", after)
	}
}

func TestCreateContainerInStoppedSandbox(t *testing.T) {
	e := newTestEnv(t)
	pod := e.runPod(t, "web")
	if _, err := e.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod}); err != nil {
		t.Fatal(err)
	}
	_, err := e.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: ctrConfig("app")})
	if err == nil || !strings.Contains(err.Error(), "is not ready: create a new sandbox") {
		t.Fatalf("err %v", err)
	}
}
