package oci

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// WithSandboxShm binds the pod's /dev/shm tmpfs (the host's /dev/shm for host IPC) into
// the pause container.
func WithSandboxShm(shm string) SpecOpt {
	return func(s *specs.Spec) error {
		if shm == "" {
			shm = "/dev/shm"
		}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/dev/shm", Type: "bind", Source: shm, Options: []string{"rbind", "rw"}})
		return nil
	}
}

// WithContainerMounts adds the pod's files (hosts, resolv.conf, hostname, /dev/shm) and
// then the request's mounts; a mount replaces base mounts at or below its destination,
// and of two request mounts on one destination the later wins. A missing host path is
// created as a directory. Bidirectional propagation makes the rootfs rshared, host-to-
// container rslave. Relative paths and unsatisfiable recursive read-only mounts are
// refused (rro says whether runc supports "rro").
func WithContainerMounts(files SandboxFiles, mounts []*runtimeapi.Mount, rro bool) SpecOpt {
	return func(s *specs.Spec) error {
		extra := podFileMounts(files)
		propagation := ""
		for _, m := range mounts {
			mnt, err := criMount(m, rro)
			if err != nil {
				return err
			}
			switch m.Propagation {
			case runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
				propagation = "rshared"
			case runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
				if propagation == "" {
					propagation = "rslave"
				}
			}
			extra = append(extra, mnt)
		}
		s.Linux.RootfsPropagation = propagation
		s.Mounts = mergeMounts(s.Mounts, extra)
		return nil
	}
}

// podFileMounts binds the pod's shared files read-write.
func podFileMounts(f SandboxFiles) []specs.Mount {
	var out []specs.Mount
	add := func(dst, src string) {
		if src != "" {
			out = append(out, specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", "rprivate", "rw"}})
		}
	}
	add("/etc/hosts", f.Hosts)
	add("/etc/resolv.conf", f.ResolvConf)
	add("/etc/hostname", f.Hostname)
	if f.Shm != "" {
		add("/dev/shm", f.Shm)
	} else {
		add("/dev/shm", "/dev/shm")
	}
	return out
}

// criMount turns one CRI mount into a bind mount, creating a missing host directory.
func criMount(m *runtimeapi.Mount, rro bool) (specs.Mount, error) {
	if !filepath.IsAbs(m.ContainerPath) {
		return specs.Mount{}, fmt.Errorf("mount container path %q must be absolute", m.ContainerPath)
	}
	if !filepath.IsAbs(m.HostPath) {
		return specs.Mount{}, fmt.Errorf("mount host path %q must be absolute", m.HostPath)
	}
	src := m.HostPath
	if _, err := os.Stat(src); os.IsNotExist(err) {
		if err := os.MkdirAll(src, 0o755); err != nil {
			return specs.Mount{}, fmt.Errorf("create missing mount source %s: %w", src, err)
		}
	} else if err != nil {
		return specs.Mount{}, fmt.Errorf("mount source %s: %w", src, err)
	}
	if r, err := filepath.EvalSymlinks(src); err == nil {
		src = r
	}
	access, err := mountAccess(m, rro)
	if err != nil {
		return specs.Mount{}, err
	}
	o := []string{"rbind", access}
	switch m.Propagation {
	case runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
		o = append(o, "rshared")
	case runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
		o = append(o, "rslave")
	default:
		o = append(o, "rprivate")
	}
	return specs.Mount{Destination: m.ContainerPath, Type: "bind", Source: src, Options: o}, nil
}

// mountAccess is "rw", "ro" or "rro" (recursive read-only: needs runc support, readonly
// and private propagation).
func mountAccess(m *runtimeapi.Mount, rro bool) (string, error) {
	if !m.RecursiveReadOnly {
		if m.Readonly {
			return "ro", nil
		}
		return "rw", nil
	}
	switch {
	case !rro:
		return "", fmt.Errorf("mount %s: recursive read-only mounts need runc >= 1.1 on Linux >= 5.12", m.ContainerPath)
	case !m.Readonly:
		return "", fmt.Errorf("mount %s: recursive_read_only needs readonly: true", m.ContainerPath)
	case m.Propagation != runtimeapi.MountPropagation_PROPAGATION_PRIVATE:
		return "", fmt.Errorf("mount %s: recursive_read_only needs private propagation", m.ContainerPath)
	}
	return "rro", nil
}

// mergeMounts puts extra after base, dropping base mounts at or below an extra destination.
func mergeMounts(base, extra []specs.Mount) []specs.Mount {
	out := []specs.Mount{}
	for _, b := range base {
		shadowed := false
		for _, e := range extra {
			if b.Destination == e.Destination || strings.HasPrefix(b.Destination, strings.TrimSuffix(e.Destination, "/")+"/") {
				shadowed = true
			}
		}
		if !shadowed {
			out = append(out, b)
		}
	}
	// A later extra mount with the same destination wins.
	for i, e := range extra {
		dup := false
		for _, later := range extra[i+1:] {
			if later.Destination == e.Destination {
				dup = true
			}
		}
		if !dup {
			out = append(out, e)
		}
	}
	return out
}
