package server

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/attach"
	"github.com/quantyroot/quantykube/internal/runtime/oci"
)

// UpdateContainerResources applies new cgroup limits with `runc update` and records them.
func (s *Service) UpdateContainerResources(ctx context.Context, r *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	c, err := s.containers.Resolve(r.ContainerId)
	if err != nil {
		return nil, notFound("container", r.ContainerId)
	}
	if r.Linux == nil {
		return &runtimeapi.UpdateContainerResourcesResponse{}, nil
	}
	defer s.locks.lock(c.ID)()
	if st := s.containerState(c); st == runtimeapi.ContainerState_CONTAINER_EXITED {
		return nil, grpcErr(fmt.Errorf("container %s has exited: nothing to update", c.ID))
	}
	res := oci.Resources(r.Linux)
	if !s.cg.HasController("hugetlb") {
		res.HugepageLimits = nil
	}
	if err := s.runc.Update(ctx, c.ID, res); err != nil {
		return nil, grpcErr(err)
	}
	cfg := proto.Clone(c.Config()).(*runtimeapi.ContainerConfig)
	if cfg.Linux == nil {
		cfg.Linux = &runtimeapi.LinuxContainerConfig{}
	}
	cfg.Linux.Resources = r.Linux
	if err := c.SetConfig(cfg); err != nil {
		return nil, grpcErr(err)
	}
	if err := s.containers.Put(c); err != nil {
		return nil, grpcErr(err)
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// reopenLogTimeout bounds a monitor's answer to a log reopen.
const reopenLogTimeout = 10 * time.Second

// ReopenContainerLog asks the container's monitor to reopen its log file (after kubelet
// rotated it). The container must be running.
func (s *Service) ReopenContainerLog(ctx context.Context, r *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	c, err := s.containers.Resolve(r.ContainerId)
	if err != nil {
		return nil, notFound("container", r.ContainerId)
	}
	if st := s.containerState(c); st != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, grpcErr(fmt.Errorf("container %s is not running: its log cannot be reopened", c.ID))
	}
	conn, err := s.dialMonitor(c.ID)
	if err != nil {
		return nil, grpcErr(err)
	}
	defer conn.Close()
	conn.(*net.UnixConn).SetDeadline(time.Now().Add(reopenLogTimeout))
	if err := attach.WriteFrame(conn, attach.ReopenLog, nil); err != nil {
		return nil, grpcErr(err)
	}
	for {
		typ, data, err := attach.ReadFrame(conn)
		if err != nil {
			return nil, grpcErr(fmt.Errorf("reopen log of %s: %w", c.ID, err))
		}
		if typ == attach.Ack {
			if len(data) > 0 {
				return nil, grpcErr(fmt.Errorf("%s", data))
			}
			return &runtimeapi.ReopenContainerLogResponse{}, nil
		}
	}
}
