package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PortForward returns a streaming URL for forwarding to ports inside the sandbox.
func (s *Service) PortForward(ctx context.Context, r *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	sb, err := s.sandboxes.Resolve(r.PodSandboxId)
	if err != nil {
		return nil, notFound("sandbox", r.PodSandboxId)
	}
	if s.sandboxState(sb) != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, grpcErr(fmt.Errorf("sandbox %s is not ready", sb.ID))
	}
	r.PodSandboxId = sb.ID
	return s.stream.GetPortForward(r)
}

// dialInNetns connects to 127.0.0.1:port inside the network namespace at path (host when empty).
func dialInNetns(path string, port int32) (net.Conn, error) {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if path == "" {
		return net.Dial("tcp4", addr)
	}
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		// The thread enters the pod's netns and is discarded afterwards (no UnlockOSThread).
		runtime.LockOSThread()
		f, err := os.Open(path)
		if err != nil {
			ch <- res{nil, fmt.Errorf("open netns: %w", err)}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- res{nil, fmt.Errorf("enter netns: %w", err)}
			return
		}
		c, err := net.Dial("tcp4", addr)
		ch <- res{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

func (sr *streamRuntime) PortForward(ctx context.Context, sandboxID string, port int32, stream io.ReadWriteCloser) error {
	sb, err := sr.s.sandboxes.Resolve(sandboxID)
	if err != nil {
		return err
	}
	conn, err := dialInNetns(sb.NetNS, port)
	if err != nil {
		return fmt.Errorf("connect to port %d in sandbox %s: %w", port, sb.ID, err)
	}
	defer conn.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(conn, stream)
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}()
	io.Copy(stream, conn)
	stream.Close()
	wg.Wait()
	return nil
}
