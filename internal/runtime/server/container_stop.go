package server

import (
	"context"
	"errors"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/monitor"
	"github.com/quantyroot/quantykube/internal/runtime/store"
)

// StopContainer sends the image's stop signal (default SIGTERM), waits up to timeout
// seconds, then kills every process of the container. Stopping an exited container is a no-op.
func (s *Service) StopContainer(ctx context.Context, r *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	c, err := s.containers.Resolve(r.ContainerId)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return &runtimeapi.StopContainerResponse{}, nil // idempotent, as kubelet expects
		}
		return nil, grpcErr(err)
	}
	defer s.locks.lock(c.ID)()
	if err := s.stopContainer(ctx, c, time.Duration(r.Timeout)*time.Second); err != nil {
		return nil, grpcErr(err)
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

func (s *Service) stopContainer(ctx context.Context, c *store.Container, timeout time.Duration) error {
	dir := s.containers.RecordDir(c.ID)
	if _, ok, _ := monitor.ReadExit(dir); ok {
		return nil
	}
	if timeout > 0 {
		sig := syscall.SIGTERM
		if img, err := s.images.Config(c.ImageID); err == nil && img.Config.StopSignal != "" {
			if n, ok := signalNumber(img.Config.StopSignal); ok {
				sig = n
			}
		}
		if err := s.runc.Kill(ctx, c.ID, sig, false); err == nil {
			if s.waitExit(ctx, dir, timeout) == nil {
				return nil
			}
		}
	}
	if err := s.runc.Kill(ctx, c.ID, syscall.SIGKILL, true); err != nil {
		if _, ok, _ := monitor.ReadExit(dir); ok {
			return nil
		}
	}
	return s.waitExit(ctx, dir, s.timeouts.exitRecorded)
}

var signals = map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT, "SIGQUIT": syscall.SIGQUIT,
	"SIGKILL": syscall.SIGKILL, "SIGHUP": syscall.SIGHUP, "SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2, "SIGWINCH": syscall.SIGWINCH}

func signalNumber(name string) (syscall.Signal, bool) {
	if len(name) < 3 || name[:3] != "SIG" {
		name = "SIG" + name
	}
	s, ok := signals[name]
	return s, ok
}
