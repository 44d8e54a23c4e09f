package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/quantyroot/quantykube/internal/runtime/store"
)

// execStdinGrace is how long an exec whose process exited waits for its stdio copies
// (a client may keep stdin open).
const execStdinGrace = time.Second

// execProcess runs cmd in running container c with the container's identity, environment
// and security settings. stdin may be nil. With tty the process gets a terminal and stdout
// carries both streams. It returns the exit code; a ctx deadline kills the process.
func (s *Service) execProcess(ctx context.Context, c *store.Container, cmd []string, stdin io.Reader, stdout, stderr io.Writer, tty bool, resize <-chan remotecommand.TerminalSize) (int, error) {
	if st := s.containerState(c); st != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return 0, fmt.Errorf("container %s is %s, not running: exec needs a running container", c.ID, st)
	}
	if len(cmd) == 0 {
		return 0, invalid("exec needs a command")
	}
	spec, err := readSpec(s.containers.RecordDir(c.ID))
	if err != nil {
		return 0, err
	}
	p := *spec.Process
	p.Args = cmd
	p.Terminal = tty
	p.ConsoleSize = nil
	tmp, err := os.MkdirTemp(s.containers.RecordDir(c.ID), "exec-")
	if err != nil {
		return 0, fmt.Errorf("exec dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	if tty {
		return s.execTTY(ctx, c, &p, tmp, stdin, stdout, resize)
	}
	pidFile := filepath.Join(tmp, "pid")
	// runc itself must outlive ctx long enough to report; the process is killed via its pid.
	rcmd, err := s.runc.ExecCommand(context.Background(), c.ID, &p, filepath.Join(tmp, "process.json"), pidFile, "")
	if err != nil {
		return 0, err
	}
	if stdin != nil {
		rcmd.Stdin = stdin
	}
	rcmd.Stdout, rcmd.Stderr = orDiscard(stdout), orDiscard(stderr)
	// A client that keeps stdin open must not hold us after the process exited.
	rcmd.WaitDelay = execStdinGrace
	if err := rcmd.Start(); err != nil {
		return 0, fmt.Errorf("start runc exec: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- rcmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		<-done
		return 0, fmt.Errorf("exec %v in %s: %w", cmd, c.ID, context.DeadlineExceeded)
	}
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		return ee.ExitCode(), nil
	}
	if errors.Is(waitErr, exec.ErrWaitDelay) && rcmd.ProcessState != nil {
		return rcmd.ProcessState.ExitCode(), nil
	}
	if waitErr != nil {
		return 0, fmt.Errorf("runc exec: %w", waitErr)
	}
	return 0, nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Exec returns a streaming URL for an interactive exec.
func (s *Service) Exec(ctx context.Context, r *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	c, err := s.containers.Resolve(r.ContainerId)
	if err != nil {
		return nil, notFound("container", r.ContainerId)
	}
	if st := s.containerState(c); st != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, grpcErr(fmt.Errorf("container %s is not running", c.ID))
	}
	if len(r.Cmd) == 0 {
		return nil, invalid("exec needs a command")
	}
	if !r.Stdout && !r.Stderr && !r.Stdin {
		return nil, invalid("exec needs one of stdin, stdout, stderr")
	}
	if r.Tty && r.Stderr {
		return nil, invalid("tty and stderr cannot both be set: a terminal merges stderr into stdout")
	}
	r.ContainerId = c.ID
	return s.stream.GetExec(r)
}

// streamRuntime adapts the service to the streaming server.
type streamRuntime struct{ s *Service }

// StreamRuntime returns the streaming.Runtime backed by s.
func (s *Service) StreamRuntime() *streamRuntime { return &streamRuntime{s} }

func (sr *streamRuntime) Exec(ctx context.Context, id string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	c, err := sr.s.containers.Resolve(id)
	if err != nil {
		return err
	}
	var stdout, stderr io.Writer
	if out != nil {
		stdout = out
	}
	if errw != nil {
		stderr = errw
	}
	code, err := sr.s.execProcess(ctx, c, cmd, in, stdout, stderr, tty, resize)
	if err != nil {
		return err
	}
	if code != 0 {
		return &utilexec.CodeExitError{Err: fmt.Errorf("command %v exited with %d", cmd, code), Code: code}
	}
	return nil
}
