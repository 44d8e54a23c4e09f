package server

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/store"
)

func (s *Service) containerStats(c *store.Container) *runtimeapi.ContainerStats {
	cfg := c.Config()
	now := time.Now().UnixNano()
	st, _ := s.cg.Stat(c.CgroupPath)
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: c.ID, Metadata: cfg.GetMetadata(), Labels: cfg.GetLabels(), Annotations: cfg.GetAnnotations()},
		Cpu:        &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: st.CPUUsageNanos}},
		Memory: &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{Value: st.MemoryWorkingSet},
			UsageBytes: &runtimeapi.UInt64Value{Value: st.MemoryUsage}, RssBytes: &runtimeapi.UInt64Value{Value: st.MemoryRSS},
			PageFaults: &runtimeapi.UInt64Value{Value: st.PageFaults}, MajorPageFaults: &runtimeapi.UInt64Value{Value: st.MajorPageFaults}},
		WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: now, FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: s.rwDir(c.ID)},
			UsedBytes: &runtimeapi.UInt64Value{Value: dirUsage(s.rwDir(c.ID))}, InodesUsed: &runtimeapi.UInt64Value{}},
	}
}

// ContainerStats reports one container's usage from its cgroup.
func (s *Service) ContainerStats(ctx context.Context, r *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	c, err := s.containers.Resolve(r.ContainerId)
	if err != nil {
		return nil, notFound("container", r.ContainerId)
	}
	return &runtimeapi.ContainerStatsResponse{Stats: s.containerStats(c)}, nil
}

// ListContainerStats reports usage of the containers matching the filter.
func (s *Service) ListContainerStats(ctx context.Context, r *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	f := r.GetFilter()
	out := []*runtimeapi.ContainerStats{}
	for _, c := range s.containers.List() {
		if f.GetId() != "" && !hasPrefix(c.ID, f.GetId()) {
			continue
		}
		if f.GetPodSandboxId() != "" && !hasPrefix(c.SandboxID, f.GetPodSandboxId()) {
			continue
		}
		if !matchLabels(c.Config().GetLabels(), f.GetLabelSelector()) {
			continue
		}
		out = append(out, s.containerStats(c))
	}
	return &runtimeapi.ListContainerStatsResponse{Stats: out}, nil
}

func (s *Service) sandboxStats(sb *store.Sandbox) *runtimeapi.PodSandboxStats {
	cfg := sb.Config()
	now := time.Now().UnixNano()
	st, _ := s.cg.Stat(sb.CgroupParent)
	ps := &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{Id: sb.ID, Metadata: cfg.GetMetadata(), Labels: cfg.GetLabels(), Annotations: cfg.GetAnnotations()},
		Linux: &runtimeapi.LinuxPodSandboxStats{
			Cpu:     &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: st.CPUUsageNanos}},
			Memory:  &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{Value: st.MemoryWorkingSet}, UsageBytes: &runtimeapi.UInt64Value{Value: st.MemoryUsage}},
			Process: &runtimeapi.ProcessUsage{Timestamp: now, ProcessCount: &runtimeapi.UInt64Value{Value: st.Pids}},
		},
	}
	for _, c := range s.containers.List() {
		if c.SandboxID == sb.ID {
			ps.Linux.Containers = append(ps.Linux.Containers, s.containerStats(c))
		}
	}
	return ps
}

// PodSandboxStats reports a sandbox's usage from its parent cgroup.
func (s *Service) PodSandboxStats(ctx context.Context, r *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	sb, err := s.sandboxes.Resolve(r.PodSandboxId)
	if err != nil {
		return nil, notFound("sandbox", r.PodSandboxId)
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: s.sandboxStats(sb)}, nil
}

// ListPodSandboxStats reports usage of the sandboxes matching the filter.
func (s *Service) ListPodSandboxStats(ctx context.Context, r *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	f := r.GetFilter()
	out := []*runtimeapi.PodSandboxStats{}
	for _, sb := range s.sandboxes.List() {
		if f.GetId() != "" && !hasPrefix(sb.ID, f.GetId()) {
			continue
		}
		if !matchLabels(sb.Config().GetLabels(), f.GetLabelSelector()) {
			continue
		}
		out = append(out, s.sandboxStats(sb))
	}
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: out}, nil
}
