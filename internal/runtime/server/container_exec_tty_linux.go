package server

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/quantyroot/quantykube/internal/runtime/console"
	"github.com/quantyroot/quantykube/internal/runtime/store"
)

const (
	// ttyHandoverTimeout bounds runc's handing over the terminal of a detached exec.
	ttyHandoverTimeout = 10 * time.Second
	// ttyDrainTimeout bounds copying what a finished tty exec left in the terminal.
	ttyDrainTimeout = 2 * time.Second
)

// execTTY runs p with a terminal: `runc exec --detach --console-socket` hands us the pty
// master and exits; the process is then reparented to us (the runtime is a child
// subreaper, see cli.serve) and reaped here for its exit code.
func (s *Service) execTTY(ctx context.Context, c *store.Container, p *specs.Process, tmp string, stdin io.Reader, stdout io.Writer, resize <-chan remotecommand.TerminalSize) (int, error) {
	master, pid, err := s.startTTYExec(c, p, tmp)
	if err != nil {
		return 0, err
	}
	defer master.Close()
	outDone := make(chan struct{})
	go func() { defer close(outDone); io.Copy(orDiscard(stdout), master) }()
	if stdin != nil {
		go io.Copy(master, stdin)
	}
	if resize != nil {
		go func() {
			for sz := range resize {
				console.Resize(master, sz.Width, sz.Height)
			}
		}()
	}
	waited := make(chan unix.WaitStatus, 1)
	go func() { waited <- reap(pid) }()
	var ws unix.WaitStatus
	select {
	case ws = <-waited:
	case <-ctx.Done():
		syscall.Kill(pid, syscall.SIGKILL)
		<-waited
		return 0, fmt.Errorf("exec in %s: %w", c.ID, context.DeadlineExceeded)
	}
	select {
	case <-outDone:
	case <-time.After(ttyDrainTimeout):
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ws.ExitStatus(), nil
}

// startTTYExec runs the detached `runc exec` and returns the terminal's master and the
// exec'd process's pid.
func (s *Service) startTTYExec(c *store.Container, p *specs.Process, tmp string) (*os.File, int, error) {
	cons, err := console.Listen(filepath.Join(tmp, "c.sock"))
	if err != nil {
		return nil, 0, err
	}
	defer cons.Close()
	pidFile := filepath.Join(tmp, "pid")
	rcmd, err := s.runc.ExecCommand(context.Background(), c.ID, p, filepath.Join(tmp, "process.json"), pidFile, cons.Path)
	if err != nil {
		return nil, 0, err
	}
	var runcOut strings.Builder
	rcmd.Stdout, rcmd.Stderr = &runcOut, &runcOut
	type accepted struct {
		f   *os.File
		err error
	}
	mc := make(chan accepted, 1)
	go func() { f, err := cons.Accept(); mc <- accepted{f, err} }()
	if err := rcmd.Run(); err != nil {
		return nil, 0, fmt.Errorf("runc exec: %s: %w", strings.TrimSpace(runcOut.String()), err)
	}
	var master *os.File
	select {
	case a := <-mc:
		if a.err != nil {
			return nil, 0, a.err
		}
		master = a.f
	case <-time.After(ttyHandoverTimeout):
		return nil, 0, fmt.Errorf("runc exec sent no terminal")
	}
	pid, err := readPidFile(pidFile)
	if err != nil {
		master.Close()
		return nil, 0, err
	}
	return master, pid, nil
}

func readPidFile(p string) (int, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, fmt.Errorf("read exec pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("parse exec pid %q: %w", b, err)
	}
	return pid, nil
}

// reap waits for pid (a child of ours), retrying when interrupted.
func reap(pid int) unix.WaitStatus {
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
			return ws
		}
	}
}
