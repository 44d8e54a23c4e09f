package server

import (
	"context"
	"errors"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/runc"
	"github.com/quantyroot/quantykube/internal/runtime/store"
)

// RemoveContainer kills the container if it runs and removes it; an unknown container is
// not an error.
func (s *Service) RemoveContainer(ctx context.Context, r *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	c, err := s.containers.Resolve(r.ContainerId)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return &runtimeapi.RemoveContainerResponse{}, nil
		}
		return nil, grpcErr(err)
	}
	defer s.locks.lock(c.ID)()
	if _, err := s.containers.Get(c.ID); err != nil {
		return &runtimeapi.RemoveContainerResponse{}, nil // removed while we waited for the lock
	}
	if err := s.removeContainer(ctx, c); err != nil {
		return nil, grpcErr(err)
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (s *Service) removeContainer(ctx context.Context, c *store.Container) error {
	if err := s.stopContainer(ctx, c, 0); err != nil {
		return fmt.Errorf("stop before remove: %w", err)
	}
	if err := s.runc.Delete(ctx, c.ID, true); err != nil && !errors.Is(err, runc.ErrNotFound) {
		return err
	}
	if err := s.unmountRootfs(c.ID, c.Rootfs); err != nil {
		return err
	}
	s.cg.Remove(c.CgroupPath, c.CgroupPath[:len(c.CgroupPath)-len(c.ID)])
	s.cleanupContainerDir(c.ID)
	s.locks.forget(c.ID)
	return s.containers.Delete(c.ID)
}
