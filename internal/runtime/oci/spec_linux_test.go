package oci

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func input(t *testing.T, cfg *runtimeapi.ContainerConfig) ContainerInput {
	t.Helper()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0::/root:/bin/sh\n"), 0o644)
	return ContainerInput{Config: cfg, Sandbox: &runtimeapi.PodSandboxConfig{},
		Image:  &v1.ConfigFile{Config: v1.Config{Entrypoint: []string{"/ep"}, Cmd: []string{"a"}, Env: []string{"A=1", "PATH=/bin"}, WorkingDir: "/w"}},
		Rootfs: root, CgroupsPath: "/p/c", NS: Namespaces{NetNS: "/run/netns/x", PausePid: 42}}
}

func TestContainerSpecCommandEnvNamespaces(t *testing.T) {
	in := input(t, &runtimeapi.ContainerConfig{Args: []string{"b"}, Envs: []*runtimeapi.KeyValue{{Key: "A", Value: []byte("2")}}})
	s, err := ContainerSpec(in)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Process.Args, " ") != "/ep b" {
		t.Errorf("args %v", s.Process.Args)
	}
	if !slices.Contains(s.Process.Env, "A=2") || slices.Contains(s.Process.Env, "A=1") || s.Process.Cwd != "/w" {
		t.Errorf("env %v cwd %s", s.Process.Env, s.Process.Cwd)
	}
	want := map[specs.LinuxNamespaceType]string{specs.NetworkNamespace: "/run/netns/x", specs.IPCNamespace: "/proc/42/ns/ipc",
		specs.UTSNamespace: "/proc/42/ns/uts", specs.PIDNamespace: "/proc/42/ns/pid", specs.MountNamespace: ""}
	for _, n := range s.Linux.Namespaces {
		if p, ok := want[n.Type]; !ok || p != n.Path {
			t.Errorf("namespace %s path %q", n.Type, n.Path)
		}
	}
	if s.Linux.CgroupsPath != "/p/c" || *s.Process.OOMScoreAdj < 0 && ClampOOMScoreAdj(-1000) >= 0 {
		t.Errorf("cgroups %s oom %d", s.Linux.CgroupsPath, *s.Process.OOMScoreAdj)
	}
	if len(s.Linux.MaskedPaths) == 0 || len(s.Linux.ReadonlyPaths) == 0 {
		t.Error("default masked/readonly paths missing")
	}
}

func TestContainerSpecCapabilitiesAndErrors(t *testing.T) {
	in := input(t, &runtimeapi.ContainerConfig{Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
		Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"NET_ADMIN"}, DropCapabilities: []string{"ALL"}}}}})
	s, err := ContainerSpec(in)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Process.Capabilities.Bounding, ",") != "CAP_NET_ADMIN" {
		t.Errorf("caps %v", s.Process.Capabilities.Bounding)
	}
	for _, cfg := range []*runtimeapi.ContainerConfig{
		{Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{RunAsGroup: &runtimeapi.Int64Value{Value: 1}}}},
		{Mounts: []*runtimeapi.Mount{{ContainerPath: "rel", HostPath: "/tmp"}}},
		{Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{Privileged: true}}},
		{Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"NOPE"}}}}},
	} {
		if _, err := ContainerSpec(input(t, cfg)); err == nil {
			t.Errorf("no error for %v", cfg)
		}
	}
}

func TestClampOOMScoreAdj(t *testing.T) {
	b, _ := os.ReadFile("/proc/self/oom_score_adj")
	own := strings.TrimSpace(string(b))
	if got := ClampOOMScoreAdj(-1000); own != "" && got < -1000 {
		t.Fatalf("clamp(-1000) = %d (own %s)", got, own)
	}
	if got := ClampOOMScoreAdj(5000); got != 1000 {
		t.Fatalf("clamp(5000) = %d", got)
	}
}
