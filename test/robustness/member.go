package robustness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// member is one server of the cluster: its fixed identity (name, URLs, data
// dir) and the process currently running it, if any. A member is restarted
// with the same flags on the same data dir.
type member struct {
	name      string
	dataDir   string
	clientURL string // http://127.0.0.1:port
	peerURL   string
	logPath   string
	args      []string // full command line after the binary
	bin       string

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the Wait error, valid once exited is closed
}

// start launches the member's process, its output appended to logPath.
func (m *member) start() error {
	logFile, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log of %s: %w", m.name, err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "# %s %s %q\n", time.Now().UTC().Format(time.RFC3339Nano), m.bin, m.args)
	cmd := exec.Command(m.bin, m.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s (%s): %w", m.name, m.bin, err)
	}
	m.cmd, m.exited = cmd, make(chan struct{})
	go func() {
		m.err = cmd.Wait()
		close(m.exited)
	}()
	return nil
}

// running reports whether the member's process is alive.
func (m *member) running() bool {
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// kill SIGKILLs the member's process group and waits until it is reaped.
func (m *member) kill() {
	if !m.running() {
		return
	}
	if err := syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = m.cmd.Process.Kill()
	}
	<-m.exited
}

// waitServing polls Status() until the member answers, its process exits or
// ctx ends.
func (m *member) waitServing(ctx context.Context) error {
	for {
		if !m.running() {
			return fmt.Errorf("%s exited: %v (log %s)", m.name, m.err, m.logPath)
		}
		if _, err := m.status(ctx); err == nil {
			return nil
		} else if ctx.Err() != nil {
			return fmt.Errorf("%s did not answer Status(): %w (log %s)", m.name, err, m.logPath)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// status makes one Status() call to the member, with a short timeout.
func (m *member) status(ctx context.Context) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{m.clientURL}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", m.clientURL, err)
	}
	defer c.Close()
	st, err := c.Status(ctx, m.clientURL)
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", m.name, err)
	}
	return st, nil
}

// setInitialClusterState replaces the value of --initial-cluster-state.
func (m *member) setInitialClusterState(state string) {
	for i := 0; i+1 < len(m.args); i++ {
		if m.args[i] == "--initial-cluster-state" {
			m.args[i+1] = state
		}
	}
}
