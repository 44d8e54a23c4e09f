// Package oci builds the OCI runtime specs (config.json) runc runs: one for a sandbox's
// pause container and one for each workload container.
//
// A spec is the base spec (Build) changed by small options (SpecOpt), applied in order,
// as containerd's oci.SpecOpts are. SandboxOpts and ContainerOpts list the options of the
// two kinds of spec; the order of a list is part of the result (mounts, namespaces,
// environment and device rules are ordered), and later options may read what earlier
// ones set (HOME reads the user; the non-root capability trim reads the user and the
// capabilities).
package oci

import (
	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DefaultMaskedPaths and DefaultReadonlyPaths apply to unprivileged containers when the
// request gives none.
var (
	DefaultMaskedPaths = []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
		"/sys/firmware", "/sys/devices/virtual/powercap", "/proc/scsi"}
	DefaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// SandboxFiles are the per-pod files every container of the pod shares.
type SandboxFiles struct {
	Hosts, ResolvConf, Hostname string
	// Shm is the pod's /dev/shm (a tmpfs mount); empty for host IPC.
	Shm string
}

// Namespaces tells a container which pod namespaces to join.
type Namespaces struct {
	NetNS    string // path; empty means host network
	PausePid int    // the pause process, whose IPC/UTS/PID namespaces are the pod's
	HostIPC  bool
	HostPID  bool
	HostNet  bool
	// PIDMode is the container's PID namespace mode; TargetPid is used for TARGET.
	PIDMode   runtimeapi.NamespaceMode
	TargetPid int
}

// SandboxSpec is the pause container's spec: SandboxOpts, then extra.
func SandboxSpec(cfg *runtimeapi.PodSandboxConfig, img *v1.ConfigFile, rootfs, cgroupsPath string, ns Namespaces, files SandboxFiles, extra ...SpecOpt) (*specs.Spec, error) {
	return Build(rootfs, true, append(SandboxOpts(cfg, img, cgroupsPath, ns, files), extra...)...)
}

// SandboxOpts are the options of a pause container's spec, in order.
func SandboxOpts(cfg *runtimeapi.PodSandboxConfig, img *v1.ConfigFile, cgroupsPath string, ns Namespaces, files SandboxFiles) []SpecOpt {
	lsc := cfg.GetLinux().GetSecurityContext()
	return []SpecOpt{
		WithPauseArgs(img),
		WithEnv(img.Config.Env, nil),
		WithCapabilities(DefaultCaps),
		WithNoNewPrivileges(true),
		WithOOMScoreAdj(-998),
		WithHostname(cfg.GetHostname()),
		WithSandboxNamespaces(ns, lsc.GetNamespaceOptions()),
		WithSandboxUser(lsc),
		WithSysctls(cfg.GetLinux().GetSysctls()),
		WithCgroupsPath(cgroupsPath),
		WithDefaultDeviceRules(),
		WithResources(cfg.GetLinux().GetResources()),
		When(lsc.GetPrivileged(), WithAllDevicesAllowed()),
		When(!lsc.GetPrivileged(), WithDefaultPaths(), WithSeccomp(lsc.GetSeccomp())),
		WithSandboxShm(files.Shm),
	}
}

// ContainerInput is what a container spec is made from.
type ContainerInput struct {
	Config      *runtimeapi.ContainerConfig
	Sandbox     *runtimeapi.PodSandboxConfig
	Image       *v1.ConfigFile
	Rootfs      string
	CgroupsPath string
	NS          Namespaces
	Files       SandboxFiles
	Hostname    string
	// RecursiveReadOnly is true when runc supports the "rro" mount option.
	RecursiveReadOnly bool
}

// ContainerSpec is a workload container's spec: ContainerOpts, then extra.
func ContainerSpec(in ContainerInput, extra ...SpecOpt) (*specs.Spec, error) {
	ro := in.Config.GetLinux().GetSecurityContext().GetReadonlyRootfs()
	return Build(in.Rootfs, ro, append(ContainerOpts(in), extra...)...)
}

// ContainerOpts are the options of a workload container's spec, in order. The rootfs
// must be mounted: the user is resolved from its /etc/passwd and /etc/group.
func ContainerOpts(in ContainerInput) []SpecOpt {
	cfg := in.Config
	lsc := cfg.GetLinux().GetSecurityContext()
	privileged := lsc.GetPrivileged()
	add, drop := lsc.GetCapabilities().GetAddCapabilities(), lsc.GetCapabilities().GetDropCapabilities()
	return []SpecOpt{
		WithContainerArgs(cfg, in.Image),
		WithEnv(in.Image.Config.Env, cfg.GetEnvs()),
		WithCwd(in.Image.Config.WorkingDir, cfg.GetWorkingDir()),
		WithTerminal(cfg.GetTty()),
		WithHostname(in.Hostname),
		WithContainerUser(in.Rootfs, in.Image.Config.User, lsc),
		WithHome(in.Rootfs),
		When(privileged, WithPrivileged(in.Sandbox.GetLinux().GetSecurityContext().GetPrivileged())),
		When(!privileged, WithCapabilityChanges(DefaultCaps, add, drop), WithDefaultDeviceRules(),
			WithDefaultPaths(), WithPaths(lsc.GetMaskedPaths(), lsc.GetReadonlyPaths()), WithSeccomp(containerSeccomp(lsc))),
		WithNoNewPrivileges(lsc.GetNoNewPrivs()),
		When(!privileged, WithNonRootCapabilities(len(add) > 0)),
		WithContainerNamespaces(in.NS, lsc.GetNamespaceOptions()),
		WithCgroupsPath(in.CgroupsPath),
		WithResources(cfg.GetLinux().GetResources()),
		WithContainerOOMScoreAdj(cfg.GetLinux().GetResources()),
		WithContainerMounts(in.Files, cfg.GetMounts(), in.RecursiveReadOnly),
		WithDevices(cfg.GetDevices()),
		WithAnnotations(cfg.GetAnnotations()),
	}
}
