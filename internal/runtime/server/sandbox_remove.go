package server

import (
	"context"
	"errors"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/store"
)

// RemovePodSandbox stops the sandbox if needed, removes its containers, and leaves nothing
// behind: runc state, mounts, netns, CNI allocation, cgroups, files. An unknown sandbox is
// not an error.
func (s *Service) RemovePodSandbox(ctx context.Context, r *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	sb, err := s.sandboxes.Resolve(r.PodSandboxId)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return &runtimeapi.RemovePodSandboxResponse{}, nil
		}
		return nil, grpcErr(err)
	}
	defer s.locks.lock(sb.ID)()
	if _, err := s.sandboxes.Get(sb.ID); err != nil {
		return &runtimeapi.RemovePodSandboxResponse{}, nil // removed while we waited for the lock
	}
	if err := s.stopSandbox(ctx, sb); err != nil {
		return nil, grpcErr(err)
	}
	for _, c := range s.containers.List() {
		if c.SandboxID == sb.ID {
			unlock := s.locks.lock(c.ID)
			err := s.removeContainer(ctx, c)
			unlock()
			if err != nil {
				return nil, grpcErr(fmt.Errorf("remove container %s: %w", c.ID, err))
			}
		}
	}
	if err := s.runc.Delete(ctx, sb.ID, true); err != nil {
		if st, serr := s.runc.State(ctx, sb.ID); serr == nil {
			return nil, grpcErr(fmt.Errorf("delete pause %s (state %s): %w", sb.ID, st.Status, err))
		}
	}
	if err := s.unmountRootfs(sb.ID, sb.Rootfs); err != nil {
		return nil, grpcErr(err)
	}
	s.removeSandboxCgroups(sb)
	s.cleanupSandboxDir(sb.ID)
	s.locks.forget(sb.ID)
	if err := s.sandboxes.Delete(sb.ID); err != nil {
		return nil, grpcErr(err)
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}
