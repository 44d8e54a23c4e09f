package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/quantyroot/quantykube/internal/runtime/attach"
	"github.com/quantyroot/quantykube/internal/runtime/monitor"
)

// Attach returns a streaming URL for attaching to the container's main process.
func (s *Service) Attach(ctx context.Context, r *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	c, err := s.containers.Resolve(r.ContainerId)
	if err != nil {
		return nil, notFound("container", r.ContainerId)
	}
	if st := s.containerState(c); st != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, grpcErr(fmt.Errorf("container %s is not running", c.ID))
	}
	if !r.Stdout && !r.Stderr && !r.Stdin {
		return nil, invalid("attach needs one of stdin, stdout, stderr")
	}
	r.ContainerId = c.ID
	return s.stream.GetAttach(r)
}

// monitorDialTimeout bounds connecting to a container's monitor socket.
const monitorDialTimeout = 5 * time.Second

func (s *Service) dialMonitor(id string) (net.Conn, error) {
	p := filepath.Join(s.containers.RecordDir(id), monitor.AttachSocketName)
	c, err := net.DialTimeout("unix", p, monitorDialTimeout)
	if err != nil {
		return nil, fmt.Errorf("connect to monitor of %s: %w", id, err)
	}
	return c, nil
}

// Attach (streaming side) relays the monitor's output frames and our stdin.
func (sr *streamRuntime) Attach(ctx context.Context, id string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	conn, err := sr.s.dialMonitor(id)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Register as an attached client at once so no output is missed.
	if err := attach.WriteFrame(conn, attach.Stdin, nil); err != nil {
		return err
	}
	if resize != nil {
		go func() {
			for sz := range resize {
				if attach.WriteFrame(conn, attach.Resize, attach.ResizeData(sz.Width, sz.Height)) != nil {
					return
				}
			}
		}()
	}
	stdinDone := make(chan struct{})
	if in != nil {
		go func() {
			defer close(stdinDone)
			buf := make([]byte, 32*1024)
			for {
				n, err := in.Read(buf)
				if n > 0 && attach.WriteFrame(conn, attach.Stdin, buf[:n]) != nil {
					return
				}
				if err != nil {
					attach.WriteFrame(conn, attach.CloseStdin, nil)
					return
				}
			}
		}()
	}
	for {
		typ, data, err := attach.ReadFrame(conn)
		if err != nil {
			return nil // the container exited or the monitor closed us
		}
		switch typ {
		case attach.Stdout:
			if out != nil {
				out.Write(data)
			}
		case attach.Stderr:
			if errw != nil {
				errw.Write(data)
			} else if tty && out != nil {
				out.Write(data)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
	}
}
