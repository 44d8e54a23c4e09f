package oci

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestWithResources(t *testing.T) {
	r := &runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 50000, CpuShares: 2, CpusetCpus: "0-1",
		MemoryLimitInBytes: 1 << 20, MemorySwapLimitInBytes: 2 << 20,
		HugepageLimits: []*runtimeapi.HugepageLimit{{PageSize: "2MB", Limit: 4}}, Unified: map[string]string{"a": "b"}}
	s := apply(t, WithCgroupsPath("/p/c"), WithResources(r))
	res := s.Linux.Resources
	if s.Linux.CgroupsPath != "/p/c" || *res.CPU.Period != 100000 || *res.CPU.Quota != 50000 || *res.CPU.Shares != 2 || res.CPU.Cpus != "0-1" {
		t.Fatalf("cpu %+v", res.CPU)
	}
	if *res.Memory.Limit != 1<<20 || *res.Memory.Swap != 2<<20 || len(res.HugepageLimits) != 1 || res.Unified["a"] != "b" {
		t.Fatalf("memory %+v hugepages %v", res.Memory, res.HugepageLimits)
	}
	if s := apply(t, WithResources(r), WithoutHugepageLimits()); s.Linux.Resources.HugepageLimits != nil {
		t.Fatal("hugepage limits kept")
	}
	if s := apply(t, WithResources(nil)); s.Linux.Resources.CPU != nil || s.Linux.Resources.Memory != nil {
		t.Fatal("nil resources set limits")
	}
	if res := Resources(&runtimeapi.LinuxContainerResources{CpuShares: 3}); res.CPU == nil || *res.CPU.Shares != 3 || res.Memory != nil {
		t.Fatalf("Resources %+v", res)
	}
}

func TestDeviceRules(t *testing.T) {
	if d := apply(t, WithDefaultDeviceRules()).Linux.Resources.Devices; len(d) != 11 || d[0].Allow || !d[1].Allow {
		t.Fatalf("default rules %+v", d)
	}
	if d := apply(t, WithDefaultDeviceRules(), WithAllDevicesAllowed()).Linux.Resources.Devices; len(d) != 1 || !d[0].Allow || d[0].Type != "" {
		t.Fatalf("allow-all %+v", d)
	}
}

func TestWithDevices(t *testing.T) {
	s := apply(t, WithDevices([]*runtimeapi.Device{{ContainerPath: "/dev/n", HostPath: "/dev/null"}}))
	d, rule := s.Linux.Devices[0], s.Linux.Resources.Devices[1]
	if d.Path != "/dev/n" || d.Type != "c" || d.Major != 1 || d.Minor != 3 || rule.Access != "rwm" || *rule.Major != 1 {
		t.Fatalf("device %+v rule %+v", d, rule)
	}
	if _, err := Build("/r", false, WithDevices([]*runtimeapi.Device{{ContainerPath: "/dev/x", HostPath: t.TempDir()}})); err == nil {
		t.Fatal("a directory accepted as device")
	}
}
