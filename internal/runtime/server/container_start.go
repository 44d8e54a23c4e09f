package server

import (
	"context"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// StartContainer runs the user process of a CREATED container.
func (s *Service) StartContainer(ctx context.Context, r *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	c, err := s.containers.Resolve(r.ContainerId)
	if err != nil {
		return nil, notFound("container", r.ContainerId)
	}
	defer s.locks.lock(c.ID)()
	if st := s.containerState(c); st != runtimeapi.ContainerState_CONTAINER_CREATED {
		return nil, grpcErr(fmt.Errorf("container %s is %s, not CREATED: create a new container", c.ID, st))
	}
	if err := s.runc.Start(ctx, c.ID); err != nil {
		return nil, grpcErr(err)
	}
	c.StartedAt = time.Now()
	if err := s.containers.Put(c); err != nil {
		return nil, grpcErr(err)
	}
	return &runtimeapi.StartContainerResponse{}, nil
}
