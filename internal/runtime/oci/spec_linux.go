// Package oci builds the OCI runtime specs (config.json) runc runs: one for a sandbox's
// pause container and one for each workload container.
package oci

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

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

// defaultDeviceRules allow the devices runc creates in every container.
func defaultDeviceRules() []specs.LinuxDeviceCgroup {
	c := func(maj, min int64) specs.LinuxDeviceCgroup {
		return specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &maj, Minor: &min, Access: "rwm"}
	}
	wild := int64(-1)
	pts := c(136, 0)
	pts.Minor = &wild
	return []specs.LinuxDeviceCgroup{c(1, 3), c(1, 5), c(1, 7), c(1, 8), c(1, 9), c(5, 0), c(5, 1), c(5, 2), pts, c(10, 200)}
}

// SandboxSpec is the pause container's spec.
func SandboxSpec(cfg *runtimeapi.PodSandboxConfig, img *v1.ConfigFile, rootfs, cgroupsPath string, ns Namespaces, files SandboxFiles) (*specs.Spec, error) {
	s := baseSpec(rootfs, true)
	args := append(append([]string{}, img.Config.Entrypoint...), img.Config.Cmd...)
	if len(args) == 0 {
		return nil, fmt.Errorf("pause image has no entrypoint or cmd: set pause_image to a pause image")
	}
	s.Process.Args = args
	s.Process.Env = mergeEnv(img.Config.Env, nil)
	s.Process.Capabilities = caps(DefaultCaps)
	s.Process.NoNewPrivileges = true
	s.Process.OOMScoreAdj = ptr(ClampOOMScoreAdj(-998))
	s.Hostname = cfg.GetHostname()
	lsc := cfg.GetLinux().GetSecurityContext()
	nso := lsc.GetNamespaceOptions()
	s.Linux.Namespaces = []specs.LinuxNamespace{{Type: specs.MountNamespace}}
	if !ns.HostNet {
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: ns.NetNS}, specs.LinuxNamespace{Type: specs.UTSNamespace})
	} else {
		s.Hostname = ""
	}
	if nso.GetIpc() != runtimeapi.NamespaceMode_NODE {
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.IPCNamespace})
	}
	if nso.GetPid() != runtimeapi.NamespaceMode_NODE {
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.PIDNamespace})
	}
	if sc := lsc.GetRunAsUser(); sc != nil {
		s.Process.User.UID = uint32(sc.Value)
	}
	if g := lsc.GetRunAsGroup(); g != nil {
		s.Process.User.GID = uint32(g.Value)
	}
	for _, g := range lsc.GetSupplementalGroups() {
		s.Process.User.AdditionalGids = append(s.Process.User.AdditionalGids, uint32(g))
	}
	s.Linux.Sysctl = cfg.GetLinux().GetSysctls()
	s.Linux.CgroupsPath = cgroupsPath
	s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, defaultDeviceRules()...)
	if r := cfg.GetLinux().GetResources(); r != nil {
		applyResources(s.Linux.Resources, r)
	}
	if lsc.GetPrivileged() {
		s.Linux.Resources.Devices = []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}
	} else {
		s.Linux.MaskedPaths, s.Linux.ReadonlyPaths = DefaultMaskedPaths, DefaultReadonlyPaths
		sec, err := Seccomp(lsc.GetSeccomp())
		if err != nil {
			return nil, err
		}
		s.Linux.Seccomp = sec
	}
	if files.Shm != "" {
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/dev/shm", Type: "bind", Source: files.Shm, Options: []string{"rbind", "rw"}})
	} else {
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/dev/shm", Type: "bind", Source: "/dev/shm", Options: []string{"rbind", "rw"}})
	}
	return s, nil
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

// ContainerSpec is a workload container's spec.
func ContainerSpec(in ContainerInput) (*specs.Spec, error) {
	cfg := in.Config
	lsc := cfg.GetLinux().GetSecurityContext()
	s := baseSpec(in.Rootfs, lsc.GetReadonlyRootfs())
	p := s.Process
	// Command replaces the image's entrypoint, args replace its cmd.
	if len(cfg.GetCommand()) > 0 {
		p.Args = append(append([]string{}, cfg.GetCommand()...), cfg.GetArgs()...)
	} else if len(cfg.GetArgs()) > 0 {
		p.Args = append(append([]string{}, in.Image.Config.Entrypoint...), cfg.GetArgs()...)
	} else {
		p.Args = append(append([]string{}, in.Image.Config.Entrypoint...), in.Image.Config.Cmd...)
	}
	if len(p.Args) == 0 {
		return nil, fmt.Errorf("no command: the image has no entrypoint or cmd and the container config gives no command")
	}
	p.Env = mergeEnv(in.Image.Config.Env, cfg.GetEnvs())
	p.Cwd = "/"
	if in.Image.Config.WorkingDir != "" {
		p.Cwd = in.Image.Config.WorkingDir
	}
	if cfg.GetWorkingDir() != "" {
		p.Cwd = cfg.GetWorkingDir()
	}
	p.Terminal = cfg.GetTty()
	s.Hostname = in.Hostname

	if lsc.GetRunAsGroup() != nil && lsc.GetRunAsUser() == nil && lsc.GetRunAsUsername() == "" {
		return nil, fmt.Errorf("run_as_group is set without run_as_user or run_as_username: set a user too")
	}
	var uid *int64
	if v := lsc.GetRunAsUser(); v != nil {
		uid = &v.Value
	}
	var gid *int64
	if v := lsc.GetRunAsGroup(); v != nil {
		gid = &v.Value
	}
	strict := lsc.GetSupplementalGroupsPolicy() == runtimeapi.SupplementalGroupsPolicy_Strict
	u, err := ResolveUser(in.Rootfs, in.Image.Config.User, uid, lsc.GetRunAsUsername(), gid, strict)
	if err != nil {
		return nil, err
	}
	// Supplementary groups: the primary gid, the request's groups, then (policy Merge)
	// the image's /etc/group memberships, without duplicates (containerd's order).
	groups := []uint32{u.GID}
	for _, g := range lsc.GetSupplementalGroups() {
		groups = append(groups, uint32(g))
	}
	groups = append(groups, u.AdditionalGids...)
	p.User = specs.User{UID: u.UID, GID: u.GID, AdditionalGids: dedup(groups)}
	if !hasEnv(p.Env, "HOME") {
		p.Env = append(p.Env, "HOME="+homeOf(in.Rootfs, u))
	}

	privileged := lsc.GetPrivileged()
	if privileged {
		if !in.Sandbox.GetLinux().GetSecurityContext().GetPrivileged() {
			return nil, fmt.Errorf("privileged container in a non-privileged sandbox: set privileged on the sandbox too")
		}
		p.Capabilities = caps(BoundingCaps())
		s.Linux.Resources.Devices = []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}
		s.Linux.Devices = HostDevices()
		for i := range s.Mounts {
			if s.Mounts[i].Destination == "/sys" || s.Mounts[i].Destination == "/sys/fs/cgroup" {
				s.Mounts[i].Options = replaceOpt(s.Mounts[i].Options, "ro", "rw")
			}
		}
	} else {
		c, err := Capabilities(DefaultCaps, lsc.GetCapabilities().GetAddCapabilities(), lsc.GetCapabilities().GetDropCapabilities())
		if err != nil {
			return nil, err
		}
		p.Capabilities = caps(c)
		s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, defaultDeviceRules()...)
		s.Linux.MaskedPaths, s.Linux.ReadonlyPaths = DefaultMaskedPaths, DefaultReadonlyPaths
		if lsc.GetMaskedPaths() != nil {
			s.Linux.MaskedPaths = lsc.GetMaskedPaths()
		}
		if lsc.GetReadonlyPaths() != nil {
			s.Linux.ReadonlyPaths = lsc.GetReadonlyPaths()
		}
		prof := lsc.GetSeccomp()
		if prof == nil && lsc.GetSeccompProfilePath() != "" {
			prof = legacySeccomp(lsc.GetSeccompProfilePath())
		}
		sec, err := Seccomp(prof)
		if err != nil {
			return nil, err
		}
		s.Linux.Seccomp = sec
	}
	p.NoNewPrivileges = lsc.GetNoNewPrivs()
	if p.User.UID != 0 && !privileged {
		// A non-root user keeps only the effective set it was granted explicitly.
		p.Capabilities.Effective, p.Capabilities.Permitted = nil, nil
		if len(lsc.GetCapabilities().GetAddCapabilities()) > 0 {
			p.Capabilities.Ambient = nil
		}
	}

	// Namespaces.
	s.Linux.Namespaces = []specs.LinuxNamespace{{Type: specs.MountNamespace}}
	if !in.NS.HostNet {
		s.Linux.Namespaces = append(s.Linux.Namespaces,
			specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: in.NS.NetNS},
			specs.LinuxNamespace{Type: specs.UTSNamespace, Path: nsPath(in.NS.PausePid, "uts")})
	}
	if !in.NS.HostIPC {
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.IPCNamespace, Path: nsPath(in.NS.PausePid, "ipc")})
	}
	switch lsc.GetNamespaceOptions().GetPid() {
	case runtimeapi.NamespaceMode_NODE:
	case runtimeapi.NamespaceMode_POD:
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.PIDNamespace, Path: nsPath(in.NS.PausePid, "pid")})
	case runtimeapi.NamespaceMode_TARGET:
		if in.NS.TargetPid == 0 {
			return nil, fmt.Errorf("pid namespace target %q is not a running container", lsc.GetNamespaceOptions().GetTargetId())
		}
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.PIDNamespace, Path: nsPath(in.NS.TargetPid, "pid")})
	default:
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.PIDNamespace})
	}

	// Resources and cgroups.
	s.Linux.CgroupsPath = in.CgroupsPath
	if r := cfg.GetLinux().GetResources(); r != nil {
		applyResources(s.Linux.Resources, r)
		if r.OomScoreAdj != 0 {
			p.OOMScoreAdj = ptr(ClampOOMScoreAdj(int(r.OomScoreAdj)))
		}
	}
	if p.OOMScoreAdj == nil {
		p.OOMScoreAdj = ptr(ClampOOMScoreAdj(0))
	}

	// Mounts: pod files, then the request's mounts (which win on the same destination).
	var mounts []specs.Mount
	add := func(dst, src string, ro bool) {
		if src == "" {
			return
		}
		o := []string{"rbind", "rprivate", "rw"}
		if ro {
			o[2] = "ro"
		}
		mounts = append(mounts, specs.Mount{Destination: dst, Type: "bind", Source: src, Options: o})
	}
	add("/etc/hosts", in.Files.Hosts, false)
	add("/etc/resolv.conf", in.Files.ResolvConf, false)
	add("/etc/hostname", in.Files.Hostname, false)
	if in.Files.Shm != "" {
		add("/dev/shm", in.Files.Shm, false)
	} else {
		add("/dev/shm", "/dev/shm", false)
	}
	rootfsPropagation := ""
	for _, m := range cfg.GetMounts() {
		if !filepath.IsAbs(m.ContainerPath) {
			return nil, fmt.Errorf("mount container path %q must be absolute", m.ContainerPath)
		}
		if !filepath.IsAbs(m.HostPath) {
			return nil, fmt.Errorf("mount host path %q must be absolute", m.HostPath)
		}
		src := m.HostPath
		if _, err := os.Stat(src); os.IsNotExist(err) {
			if err := os.MkdirAll(src, 0o755); err != nil {
				return nil, fmt.Errorf("create missing mount source %s: %w", src, err)
			}
		} else if err != nil {
			return nil, fmt.Errorf("mount source %s: %w", src, err)
		}
		if r, err := filepath.EvalSymlinks(src); err == nil {
			src = r
		}
		o := []string{"rbind", "rw"}
		if m.Readonly {
			o[1] = "ro"
		}
		if m.RecursiveReadOnly {
			switch {
			case !in.RecursiveReadOnly:
				return nil, fmt.Errorf("mount %s: recursive read-only mounts need runc >= 1.1 on Linux >= 5.12", m.ContainerPath)
			case !m.Readonly:
				return nil, fmt.Errorf("mount %s: recursive_read_only needs readonly: true", m.ContainerPath)
			case m.Propagation != runtimeapi.MountPropagation_PROPAGATION_PRIVATE:
				return nil, fmt.Errorf("mount %s: recursive_read_only needs private propagation", m.ContainerPath)
			}
			o[1] = "rro"
		}
		switch m.Propagation {
		case runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
			o = append(o, "rshared")
			rootfsPropagation = "rshared"
		case runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
			o = append(o, "rslave")
			if rootfsPropagation == "" {
				rootfsPropagation = "rslave"
			}
		default:
			o = append(o, "rprivate")
		}
		mounts = append(mounts, specs.Mount{Destination: m.ContainerPath, Type: "bind", Source: src, Options: o})
	}
	s.Linux.RootfsPropagation = rootfsPropagation
	s.Mounts = mergeMounts(s.Mounts, mounts)
	if privileged {
		s.Linux.MaskedPaths, s.Linux.ReadonlyPaths = nil, nil
	}
	for _, d := range cfg.GetDevices() {
		dev, rule, err := device(d)
		if err != nil {
			return nil, err
		}
		s.Linux.Devices = append(s.Linux.Devices, dev)
		s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, rule)
	}
	s.Annotations = cfg.GetAnnotations()
	return s, nil
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

func nsPath(pid int, ns string) string {
	if pid == 0 {
		return ""
	}
	return fmt.Sprintf("/proc/%d/ns/%s", pid, ns)
}

func ptr[T any](v T) *T { return &v }

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

func mergeEnv(image []string, kvs []*runtimeapi.KeyValue) []string {
	out := []string{}
	idx := map[string]int{}
	set := func(k, v string) {
		if i, ok := idx[k]; ok {
			out[i] = k + "=" + v
			return
		}
		idx[k] = len(out)
		out = append(out, k+"="+v)
	}
	for _, e := range image {
		k, v, _ := strings.Cut(e, "=")
		set(k, v)
	}
	for _, kv := range kvs {
		set(kv.Key, string(kv.Value))
	}
	if _, ok := idx["PATH"]; !ok {
		out = append([]string{defaultPath}, out...)
	}
	return out
}

func hasEnv(env []string, k string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, k+"=") {
			return true
		}
	}
	return false
}

func homeOf(rootfs string, u User) string {
	b, err := os.ReadFile(filepath.Join(rootfs, "etc/passwd"))
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			p := strings.Split(l, ":")
			if len(p) >= 6 && p[2] == fmt.Sprint(u.UID) && p[5] != "" {
				return p[5]
			}
		}
	}
	return "/"
}

// applyResources copies CRI linux resources into an OCI resources block.
func applyResources(r *specs.LinuxResources, c *runtimeapi.LinuxContainerResources) {
	if c.CpuPeriod != 0 || c.CpuQuota != 0 || c.CpuShares != 0 || c.CpusetCpus != "" || c.CpusetMems != "" {
		r.CPU = &specs.LinuxCPU{Cpus: c.CpusetCpus, Mems: c.CpusetMems}
		if c.CpuPeriod != 0 {
			r.CPU.Period = ptr(uint64(c.CpuPeriod))
		}
		if c.CpuQuota != 0 {
			r.CPU.Quota = ptr(c.CpuQuota)
		}
		if c.CpuShares != 0 {
			r.CPU.Shares = ptr(uint64(c.CpuShares))
		}
	}
	if c.MemoryLimitInBytes != 0 {
		r.Memory = &specs.LinuxMemory{Limit: ptr(c.MemoryLimitInBytes)}
		if c.MemorySwapLimitInBytes != 0 {
			r.Memory.Swap = ptr(c.MemorySwapLimitInBytes)
		}
	}
	for _, h := range c.HugepageLimits {
		r.HugepageLimits = append(r.HugepageLimits, specs.LinuxHugepageLimit{Pagesize: h.PageSize, Limit: h.Limit})
	}
	if len(c.Unified) > 0 {
		r.Unified = c.Unified
	}
}

// Resources converts CRI resources for `runc update`.
func Resources(c *runtimeapi.LinuxContainerResources) *specs.LinuxResources {
	r := &specs.LinuxResources{}
	applyResources(r, c)
	return r
}

func device(d *runtimeapi.Device) (specs.LinuxDevice, specs.LinuxDeviceCgroup, error) {
	var st unixStat
	if err := statDevice(d.HostPath, &st); err != nil {
		return specs.LinuxDevice{}, specs.LinuxDeviceCgroup{}, fmt.Errorf("device %s: %w", d.HostPath, err)
	}
	perms := d.Permissions
	if perms == "" {
		perms = "rwm"
	}
	dev := specs.LinuxDevice{Path: d.ContainerPath, Type: st.typ, Major: st.major, Minor: st.minor, FileMode: ptr(st.mode), UID: ptr(uint32(0)), GID: ptr(uint32(0))}
	return dev, specs.LinuxDeviceCgroup{Allow: true, Type: st.typ, Major: &st.major, Minor: &st.minor, Access: perms}, nil
}

func dedup(in []uint32) []uint32 {
	seen := map[uint32]bool{}
	out := []uint32{}
	for _, v := range in {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
