package oci

import specs "github.com/opencontainers/runtime-spec/specs-go"

// SpecOpt changes a spec being built. It may read what options applied before it set.
type SpecOpt func(*specs.Spec) error

// Build returns the base spec with opts applied in order; the first error stops it. The
// base spec has rootfs (read-only when readonly), cwd "/", PATH, the standard mounts
// (/proc, /dev, /dev/pts, /dev/mqueue, read-only /sys and /sys/fs/cgroup) and a device
// cgroup that denies everything until rules are added.
func Build(rootfs string, readonly bool, opts ...SpecOpt) (*specs.Spec, error) {
	s := baseSpec(rootfs, readonly)
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// When applies opts only if cond holds.
func When(cond bool, opts ...SpecOpt) SpecOpt {
	return func(s *specs.Spec) error {
		if !cond {
			return nil
		}
		for _, o := range opts {
			if err := o(s); err != nil {
				return err
			}
		}
		return nil
	}
}

func baseSpec(rootfs string, readonly bool) *specs.Spec {
	return &specs.Spec{
		Version: specs.Version,
		Root:    &specs.Root{Path: rootfs, Readonly: readonly},
		Process: &specs.Process{Cwd: "/", Env: []string{defaultPath}},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
		},
		Linux: &specs.Linux{
			Resources: &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}},
		},
	}
}

func ptr[T any](v T) *T { return &v }
