package server

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/monitor"
	"github.com/quantyroot/quantykube/internal/runtime/runc"
	"github.com/quantyroot/quantykube/internal/runtime/store"
)

// StopPodSandbox stops every container of the pod, the pause process, and tears the
// network down (releasing the IP). It is idempotent; an unknown sandbox is not an error,
// as kubelet may call it for a sandbox already removed.
func (s *Service) StopPodSandbox(ctx context.Context, r *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	sb, err := s.sandboxes.Resolve(r.PodSandboxId)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return &runtimeapi.StopPodSandboxResponse{}, nil
		}
		return nil, grpcErr(err)
	}
	defer s.locks.lock(sb.ID)()
	if err := s.stopSandbox(ctx, sb); err != nil {
		return nil, grpcErr(err)
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// stopSandbox stops the containers, the pause process and the network. Caller holds the sandbox lock.
func (s *Service) stopSandbox(ctx context.Context, sb *store.Sandbox) error {
	for _, c := range s.containers.List() {
		if c.SandboxID == sb.ID {
			unlock := s.locks.lock(c.ID)
			err := s.stopContainer(ctx, c, 0)
			unlock()
			if err != nil {
				return fmt.Errorf("stop container %s: %w", c.ID, err)
			}
		}
	}
	if err := s.stopPause(ctx, sb); err != nil {
		return err
	}
	if sb.NetworkSetUp {
		if err := s.net.Teardown(ctx, s.cniPod(sb)); err != nil {
			return err
		}
		sb.NetworkSetUp = false
	}
	sb.Ready = false
	return s.sandboxes.Put(sb)
}

// stopPause kills the pause process and waits for the monitor to record its exit.
func (s *Service) stopPause(ctx context.Context, sb *store.Sandbox) error {
	dir := s.sandboxes.RecordDir(sb.ID)
	if _, ok, _ := monitor.ReadExit(dir); ok {
		return nil
	}
	if err := s.runc.Kill(ctx, sb.ID, syscall.SIGKILL, true); err != nil && !errors.Is(err, runc.ErrNotFound) {
		// The pause may already be gone; runc reports "container not running".
		if st, serr := s.runc.State(ctx, sb.ID); serr == nil && st.Status == "running" {
			return fmt.Errorf("kill pause of %s: %w", sb.ID, err)
		}
	}
	return s.waitExit(ctx, dir, s.timeouts.exitRecorded)
}

// waitExit waits until the monitor in dir recorded its process's exit, for at most
// timeout. The caller's ctx ending returns its error; the timeout passing is an error
// naming dir.
func (s *Service) waitExit(ctx context.Context, dir string, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, s.timeouts.exitPoll, timeout, true, func(context.Context) (bool, error) {
		_, ok, err := monitor.ReadExit(dir)
		return ok, err
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case wait.Interrupted(err):
		return fmt.Errorf("process in %s did not exit within %s", dir, timeout)
	}
	return err
}
