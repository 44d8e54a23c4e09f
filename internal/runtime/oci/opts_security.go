package oci

import (
	"fmt"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// WithCapabilities sets the bounding, effective and permitted sets to c.
func WithCapabilities(c []string) SpecOpt {
	return func(s *specs.Spec) error {
		s.Process.Capabilities = caps(c)
		return nil
	}
}

// WithCapabilityChanges sets the capabilities to base with the request's drops and adds
// (Capabilities); an unknown name is refused.
func WithCapabilityChanges(base, add, drop []string) SpecOpt {
	return func(s *specs.Spec) error {
		c, err := Capabilities(base, add, drop)
		if err != nil {
			return err
		}
		s.Process.Capabilities = caps(c)
		return nil
	}
}

// WithNonRootCapabilities trims the capabilities of a non-root user to the bounding set:
// it keeps only the effective set it was granted explicitly. The user and the
// capabilities must be set before.
func WithNonRootCapabilities(added bool) SpecOpt {
	return func(s *specs.Spec) error {
		if s.Process.User.UID == 0 {
			return nil
		}
		s.Process.Capabilities.Effective, s.Process.Capabilities.Permitted = nil, nil
		if added {
			s.Process.Capabilities.Ambient = nil
		}
		return nil
	}
}

// WithPrivileged gives a privileged container every capability this process holds, every
// host device, and read-write /sys and /sys/fs/cgroup. It is refused unless the sandbox is
// privileged too.
func WithPrivileged(sandboxPrivileged bool) SpecOpt {
	return func(s *specs.Spec) error {
		if !sandboxPrivileged {
			return fmt.Errorf("privileged container in a non-privileged sandbox: set privileged on the sandbox too")
		}
		s.Process.Capabilities = caps(BoundingCaps())
		s.Linux.Resources.Devices = []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}
		s.Linux.Devices = HostDevices()
		for i := range s.Mounts {
			if s.Mounts[i].Destination == "/sys" || s.Mounts[i].Destination == "/sys/fs/cgroup" {
				s.Mounts[i].Options = replaceOpt(s.Mounts[i].Options, "ro", "rw")
			}
		}
		return nil
	}
}

// WithDefaultPaths masks and makes read-only the default /proc and /sys paths.
func WithDefaultPaths() SpecOpt {
	return func(s *specs.Spec) error {
		s.Linux.MaskedPaths, s.Linux.ReadonlyPaths = DefaultMaskedPaths, DefaultReadonlyPaths
		return nil
	}
}

// WithPaths replaces the masked and read-only paths with the request's; a nil list keeps
// what is set, an empty one clears it.
func WithPaths(masked, readonly []string) SpecOpt {
	return func(s *specs.Spec) error {
		if masked != nil {
			s.Linux.MaskedPaths = masked
		}
		if readonly != nil {
			s.Linux.ReadonlyPaths = readonly
		}
		return nil
	}
}

// WithSeccomp sets the filter of a CRI profile (Seccomp); a bad profile is refused.
func WithSeccomp(p *runtimeapi.SecurityProfile) SpecOpt {
	return func(s *specs.Spec) error {
		sec, err := Seccomp(p)
		if err != nil {
			return err
		}
		s.Linux.Seccomp = sec
		return nil
	}
}

// containerSeccomp is the container's profile, from the deprecated profile path when the
// structured field is unset.
func containerSeccomp(lsc *runtimeapi.LinuxContainerSecurityContext) *runtimeapi.SecurityProfile {
	if p := lsc.GetSeccomp(); p != nil || lsc.GetSeccompProfilePath() == "" {
		return p
	}
	return legacySeccomp(lsc.GetSeccompProfilePath())
}

func legacySeccomp(path string) *runtimeapi.SecurityProfile {
	switch path {
	case "unconfined", "":
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	case "runtime/default", "docker/default":
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: strings.TrimPrefix(path, "localhost/")}
}

func caps(c []string) *specs.LinuxCapabilities {
	return &specs.LinuxCapabilities{Bounding: c, Effective: c, Permitted: c}
}

func replaceOpt(opts []string, from, to string) []string {
	out := make([]string, 0, len(opts))
	for _, o := range opts {
		if o == from {
			o = to
		}
		out = append(out, o)
	}
	return out
}
