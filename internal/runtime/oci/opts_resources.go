package oci

import (
	"fmt"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// WithCgroupsPath sets the cgroup runc creates (hierarchy-relative).
func WithCgroupsPath(p string) SpecOpt {
	return func(s *specs.Spec) error {
		s.Linux.CgroupsPath = p
		return nil
	}
}

// WithResources copies CRI limits (nil: none) into the spec's resources.
func WithResources(r *runtimeapi.LinuxContainerResources) SpecOpt {
	return func(s *specs.Spec) error {
		if r != nil {
			applyResources(s.Linux.Resources, r)
		}
		return nil
	}
}

// WithoutHugepageLimits drops hugetlb limits: kubelet sends them (often 0) for every page
// size, and runc refuses to create a container that has any without a hugetlb controller.
func WithoutHugepageLimits() SpecOpt {
	return func(s *specs.Spec) error {
		s.Linux.Resources.HugepageLimits = nil
		return nil
	}
}

// WithDefaultDeviceRules allows the devices runc creates in every container (null, zero,
// full, random, urandom, tty, console, ptmx, the pts and tun).
func WithDefaultDeviceRules() SpecOpt {
	return func(s *specs.Spec) error {
		s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, defaultDeviceRules()...)
		return nil
	}
}

// WithAllDevicesAllowed replaces the device rules with one allowing every device.
func WithAllDevicesAllowed() SpecOpt {
	return func(s *specs.Spec) error {
		s.Linux.Resources.Devices = []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}
		return nil
	}
}

// WithDevices adds the request's host devices (created in the container, owned by root)
// and their cgroup rules (permissions default "rwm"). A path that is no device is refused.
func WithDevices(devs []*runtimeapi.Device) SpecOpt {
	return func(s *specs.Spec) error {
		for _, d := range devs {
			dev, rule, err := device(d)
			if err != nil {
				return err
			}
			s.Linux.Devices = append(s.Linux.Devices, dev)
			s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, rule)
		}
		return nil
	}
}

func defaultDeviceRules() []specs.LinuxDeviceCgroup {
	c := func(maj, min int64) specs.LinuxDeviceCgroup {
		return specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &maj, Minor: &min, Access: "rwm"}
	}
	wild := int64(-1)
	pts := c(136, 0)
	pts.Minor = &wild
	return []specs.LinuxDeviceCgroup{c(1, 3), c(1, 5), c(1, 7), c(1, 8), c(1, 9), c(5, 0), c(5, 1), c(5, 2), pts, c(10, 200)}
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
