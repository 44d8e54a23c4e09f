package server

import (
	"bytes"
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ExecSync runs a command to completion and returns its output and exit code. A timeout
// (seconds, 0 = none) kills the process and returns DeadlineExceeded.
func (s *Service) ExecSync(ctx context.Context, r *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	c, err := s.containers.Resolve(r.ContainerId)
	if err != nil {
		return nil, notFound("container", r.ContainerId)
	}
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(r.Timeout)*time.Second)
		defer cancel()
	}
	var stdout, stderr bytes.Buffer
	code, err := s.execProcess(ctx, c, r.Cmd, nil, &stdout, &stderr, false, nil)
	if err != nil {
		return nil, grpcErr(err)
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: int32(code)}, nil
}
