package runtimee2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// proc is a process the test started; done closes when it has exited.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// start runs name with its output appended to logFile.
func start(t *testing.T, logFile, name string, args ...string) *proc {
	t.Helper()
	f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	must(t, err)
	defer f.Close()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	must(t, cmd.Start())
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig and waits for the exit.
func (p *proc) stop(sig syscall.Signal) {
	if p == nil {
		return
	}
	p.cmd.Process.Signal(sig)
	<-p.done
}

// startRuntime starts `quantykube runtime` and waits for its socket.
func (e *env) startRuntime(t *testing.T) {
	t.Helper()
	os.Remove(e.socket())
	p := start(t, filepath.Join(e.work, "runtime.log"), e.qk, "runtime", "--config", filepath.Join(e.run, "runtime.toml"))
	c, cancel := ctx(socketTimeout)
	defer cancel()
	err := wait.PollUntilContextCancel(c, pollInterval, true, func(context.Context) (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("runtime exited")
		}
		_, err := os.Stat(e.socket())
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("runtime did not start (%v): see %s\n%s", err, filepath.Join(e.work, "runtime.log"), tail(filepath.Join(e.work, "runtime.log"), 20))
	}
	e.rt = p
}

// killRuntime is kill -9 of the runtime: its containers must not notice.
func (e *env) killRuntime() {
	e.rt.stop(syscall.SIGKILL)
	e.rt = nil
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// cri is a CRI client on the runtime's socket.
type cri struct {
	runtimeapi.RuntimeServiceClient
	runtimeapi.ImageServiceClient
	conn *grpc.ClientConn
}

// dial connects to the runtime's socket for the rest of the test.
func (e *env) dial(t *testing.T) *cri {
	t.Helper()
	c, err := dialCRI(e.socket())
	must(t, err)
	t.Cleanup(func() { c.conn.Close() })
	return c
}

func dialCRI(socket string) (*cri, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", socket, err)
	}
	return &cri{RuntimeServiceClient: runtimeapi.NewRuntimeServiceClient(conn), ImageServiceClient: runtimeapi.NewImageServiceClient(conn), conn: conn}, nil
}
