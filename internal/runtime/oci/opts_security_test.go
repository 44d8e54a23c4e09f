package oci

import (
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestWithCapabilities(t *testing.T) {
	c := apply(t, WithCapabilities([]string{"CAP_KILL"})).Process.Capabilities
	if !slices.Equal(c.Bounding, []string{"CAP_KILL"}) || !slices.Equal(c.Effective, c.Bounding) || !slices.Equal(c.Permitted, c.Bounding) {
		t.Fatalf("caps %+v", c)
	}
	c = apply(t, WithCapabilityChanges(DefaultCaps, []string{"sys_admin"}, []string{"ALL"})).Process.Capabilities
	if !slices.Equal(c.Bounding, []string{"CAP_SYS_ADMIN"}) {
		t.Fatalf("drop ALL add SYS_ADMIN: %v", c.Bounding)
	}
	if _, err := Build("/r", false, WithCapabilityChanges(DefaultCaps, []string{"NOPE"}, nil)); err == nil {
		t.Fatal("unknown capability accepted")
	}
}

func TestWithNonRootCapabilities(t *testing.T) {
	asUser := func(uid uint32) SpecOpt {
		return func(s *specs.Spec) error { s.Process.User.UID = uid; return nil }
	}
	c := apply(t, WithCapabilities(DefaultCaps), asUser(1000), WithNonRootCapabilities(false)).Process.Capabilities
	if c.Effective != nil || c.Permitted != nil || len(c.Bounding) != len(DefaultCaps) {
		t.Fatalf("non-root caps %+v", c)
	}
	c = apply(t, WithCapabilities(DefaultCaps), asUser(0), WithNonRootCapabilities(false)).Process.Capabilities
	if len(c.Effective) != len(DefaultCaps) {
		t.Fatalf("root lost effective caps: %+v", c)
	}
}

func TestWithPrivileged(t *testing.T) {
	if _, err := Build("/r", false, WithPrivileged(false)); err == nil {
		t.Fatal("privileged container in unprivileged sandbox accepted")
	}
	s := apply(t, WithPrivileged(true))
	if !slices.Equal(s.Process.Capabilities.Bounding, BoundingCaps()) {
		t.Fatalf("caps %v", s.Process.Capabilities.Bounding)
	}
	if d := s.Linux.Resources.Devices; len(d) != 1 || !d[0].Allow {
		t.Fatalf("device rules %+v", d)
	}
	for _, m := range s.Mounts {
		if (m.Destination == "/sys" || m.Destination == "/sys/fs/cgroup") && slices.Contains(m.Options, "ro") {
			t.Fatalf("%s still read-only: %v", m.Destination, m.Options)
		}
	}
	if len(s.Linux.Devices) != len(HostDevices()) {
		t.Fatalf("%d host devices, want %d", len(s.Linux.Devices), len(HostDevices()))
	}
}

func TestWithPaths(t *testing.T) {
	s := apply(t, WithDefaultPaths())
	if !slices.Equal(s.Linux.MaskedPaths, DefaultMaskedPaths) || !slices.Equal(s.Linux.ReadonlyPaths, DefaultReadonlyPaths) {
		t.Fatal("default paths")
	}
	s = apply(t, WithDefaultPaths(), WithPaths(nil, []string{}))
	if !slices.Equal(s.Linux.MaskedPaths, DefaultMaskedPaths) || s.Linux.ReadonlyPaths == nil || len(s.Linux.ReadonlyPaths) != 0 {
		t.Fatalf("nil keeps, empty clears: %v %v", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths)
	}
}

func TestWithSeccomp(t *testing.T) {
	if s := apply(t, WithSeccomp(&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault})); s.Linux.Seccomp == nil {
		t.Fatal("RuntimeDefault gave no filter")
	}
	if s := apply(t, WithSeccomp(nil)); s.Linux.Seccomp != nil {
		t.Fatal("nil profile gave a filter")
	}
	if _, err := Build("/r", false, WithSeccomp(&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "rel"})); err == nil {
		t.Fatal("relative localhost profile accepted")
	}
}

func TestContainerSeccompLegacyPath(t *testing.T) {
	for path, want := range map[string]runtimeapi.SecurityProfile_ProfileType{"unconfined": runtimeapi.SecurityProfile_Unconfined,
		"runtime/default": runtimeapi.SecurityProfile_RuntimeDefault, "docker/default": runtimeapi.SecurityProfile_RuntimeDefault,
		"localhost/p.json": runtimeapi.SecurityProfile_Localhost} {
		p := containerSeccomp(&runtimeapi.LinuxContainerSecurityContext{SeccompProfilePath: path})
		if p.ProfileType != want || (want == runtimeapi.SecurityProfile_Localhost && !strings.HasSuffix(p.LocalhostRef, "p.json")) {
			t.Errorf("%s: %v", path, p)
		}
	}
	structured := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	if p := containerSeccomp(&runtimeapi.LinuxContainerSecurityContext{Seccomp: structured, SeccompProfilePath: "runtime/default"}); p != structured {
		t.Fatal("the structured field must win over the path")
	}
	if containerSeccomp(nil) != nil {
		t.Fatal("no profile must give none")
	}
}
