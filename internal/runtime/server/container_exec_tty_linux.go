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

// execTTY runs p with a terminal: `runc exec --detach --console-socket` hands us the pty
// master and exits; the process is then reparented to us (the runtime is a child
// subreaper, see cli.serve) and reaped here for its exit code.
func (s *Service) execTTY(ctx context.Context, c *store.Container, p *specs.Process, tmp string, stdin io.Reader, stdout io.Writer, resize <-chan remotecommand.TerminalSize) (int, error) {
	cons, err := console.Listen(filepath.Join(tmp, "c.sock"))
	if err != nil {
		return 0, err
	}
	defer cons.Close()
	pidFile := filepath.Join(tmp, "pid")
	rcmd, err := s.runc.ExecCommand(context.Background(), c.ID, p, filepath.Join(tmp, "process.json"), pidFile, cons.Path)
	if err != nil {
		return 0, err
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
		return 0, fmt.Errorf("runc exec: %s: %w", strings.TrimSpace(runcOut.String()), err)
	}
	var master *os.File
	select {
	case a := <-mc:
		if a.err != nil {
			return 0, a.err
		}
		master = a.f
	case <-time.After(10 * time.Second):
		return 0, fmt.Errorf("runc exec sent no terminal")
	}
	defer master.Close()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, fmt.Errorf("read exec pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("parse exec pid %q: %w", b, err)
	}
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
	go func() {
		var ws unix.WaitStatus
		for {
			_, err := unix.Wait4(pid, &ws, 0, nil)
			if err != unix.EINTR {
				break
			}
		}
		waited <- ws
	}()
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
	case <-time.After(2 * time.Second):
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ws.ExitStatus(), nil
}
