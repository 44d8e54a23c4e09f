package oci

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func mountAt(s *specs.Spec, dst string) (specs.Mount, int) {
	n := 0
	var found specs.Mount
	for _, m := range s.Mounts {
		if m.Destination == dst {
			found, n = m, n+1
		}
	}
	return found, n
}

func TestWithSandboxShm(t *testing.T) {
	if m, _ := mountAt(apply(t, WithSandboxShm("/sb/shm")), "/dev/shm"); m.Source != "/sb/shm" || strings.Join(m.Options, ",") != "rbind,rw" {
		t.Fatalf("pod shm %+v", m)
	}
	if m, _ := mountAt(apply(t, WithSandboxShm("")), "/dev/shm"); m.Source != "/dev/shm" {
		t.Fatalf("host shm %+v", m)
	}
}

func TestWithContainerMounts(t *testing.T) {
	dir := t.TempDir()
	files := SandboxFiles{Hosts: "/sb/hosts", ResolvConf: "/sb/resolv", Hostname: "/sb/hostname"}
	mounts := []*runtimeapi.Mount{
		{ContainerPath: "/a", HostPath: filepath.Join(dir, "new"), Readonly: true},
		{ContainerPath: "/b", HostPath: dir, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
		{ContainerPath: "/etc/hosts", HostPath: dir},
		{ContainerPath: "/dev", HostPath: dir},
	}
	s := apply(t, WithContainerMounts(files, mounts, false))
	if _, err := os.Stat(filepath.Join(dir, "new")); err != nil {
		t.Fatalf("missing host path not created: %v", err)
	}
	if m, _ := mountAt(s, "/a"); !slices.Contains(m.Options, "ro") || !slices.Contains(m.Options, "rprivate") {
		t.Fatalf("/a %+v", m)
	}
	if m, _ := mountAt(s, "/b"); !slices.Contains(m.Options, "rslave") || s.Linux.RootfsPropagation != "rslave" {
		t.Fatalf("/b %+v, rootfs propagation %q", m, s.Linux.RootfsPropagation)
	}
	if m, n := mountAt(s, "/etc/hosts"); n != 1 || m.Source != dir {
		t.Fatalf("/etc/hosts: %d mounts, %+v", n, m)
	}
	for _, shadowed := range []string{"/dev/pts", "/dev/mqueue"} {
		if _, n := mountAt(s, shadowed); n != 0 {
			t.Errorf("%s not shadowed by the /dev mount", shadowed)
		}
	}
	shared := []*runtimeapi.Mount{{ContainerPath: "/s", HostPath: dir, Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL},
		{ContainerPath: "/t", HostPath: dir, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER}}
	if s := apply(t, WithContainerMounts(files, shared, false)); s.Linux.RootfsPropagation != "rshared" {
		t.Fatalf("rootfs propagation %q", s.Linux.RootfsPropagation)
	}
}

func TestWithContainerMountsRecursiveReadOnly(t *testing.T) {
	dir := t.TempDir()
	ok := &runtimeapi.Mount{ContainerPath: "/r", HostPath: dir, Readonly: true, RecursiveReadOnly: true, Propagation: runtimeapi.MountPropagation_PROPAGATION_PRIVATE}
	if m, _ := mountAt(apply(t, WithContainerMounts(SandboxFiles{}, []*runtimeapi.Mount{ok}, true)), "/r"); !slices.Contains(m.Options, "rro") {
		t.Fatalf("rro mount %+v", m)
	}
	for _, tc := range []struct {
		m   *runtimeapi.Mount
		rro bool
	}{
		{ok, false},
		{&runtimeapi.Mount{ContainerPath: "/r", HostPath: dir, RecursiveReadOnly: true}, true},
		{&runtimeapi.Mount{ContainerPath: "/r", HostPath: dir, Readonly: true, RecursiveReadOnly: true, Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL}, true},
		{&runtimeapi.Mount{ContainerPath: "rel", HostPath: dir}, true},
		{&runtimeapi.Mount{ContainerPath: "/r", HostPath: "rel"}, true},
	} {
		if _, err := Build("/r", false, WithContainerMounts(SandboxFiles{}, []*runtimeapi.Mount{tc.m}, tc.rro)); err == nil {
			t.Errorf("%v (rro %v) accepted", tc.m, tc.rro)
		}
	}
}
