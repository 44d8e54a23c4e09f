package oci

import (
	"fmt"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// WithSandboxNamespaces gives the pause process new mount, network (the pinned one at
// ns.NetNS), UTS, IPC and PID namespaces, except those the pod shares with the node. A
// host-network pod keeps the node's hostname.
func WithSandboxNamespaces(ns Namespaces, nso *runtimeapi.NamespaceOption) SpecOpt {
	return func(s *specs.Spec) error {
		s.Linux.Namespaces = []specs.LinuxNamespace{{Type: specs.MountNamespace}}
		if !ns.HostNet {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: ns.NetNS},
				specs.LinuxNamespace{Type: specs.UTSNamespace})
		} else {
			s.Hostname = ""
		}
		if nso.GetIpc() != runtimeapi.NamespaceMode_NODE {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.IPCNamespace})
		}
		if nso.GetPid() != runtimeapi.NamespaceMode_NODE {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.PIDNamespace})
		}
		return nil
	}
}

// WithContainerNamespaces makes a container join its pod: a new mount namespace, the
// pod's network (ns.NetNS) and the pause process's UTS and IPC namespaces unless the pod
// uses the node's, and the PID namespace its mode asks for: the node's (NODE), the pod's
// (POD), another container's (TARGET, which must run) or its own (CONTAINER).
func WithContainerNamespaces(ns Namespaces, nso *runtimeapi.NamespaceOption) SpecOpt {
	return func(s *specs.Spec) error {
		s.Linux.Namespaces = []specs.LinuxNamespace{{Type: specs.MountNamespace}}
		if !ns.HostNet {
			s.Linux.Namespaces = append(s.Linux.Namespaces,
				specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: ns.NetNS},
				specs.LinuxNamespace{Type: specs.UTSNamespace, Path: nsPath(ns.PausePid, "uts")})
		}
		if !ns.HostIPC {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.IPCNamespace, Path: nsPath(ns.PausePid, "ipc")})
		}
		switch nso.GetPid() {
		case runtimeapi.NamespaceMode_NODE:
		case runtimeapi.NamespaceMode_POD:
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.PIDNamespace, Path: nsPath(ns.PausePid, "pid")})
		case runtimeapi.NamespaceMode_TARGET:
			if ns.TargetPid == 0 {
				return fmt.Errorf("pid namespace target %q is not a running container", nso.GetTargetId())
			}
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.PIDNamespace, Path: nsPath(ns.TargetPid, "pid")})
		default:
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.PIDNamespace})
		}
		return nil
	}
}

func nsPath(pid int, ns string) string {
	if pid == 0 {
		return ""
	}
	return fmt.Sprintf("/proc/%d/ns/%s", pid, ns)
}
