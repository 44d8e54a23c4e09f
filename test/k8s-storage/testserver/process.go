package testserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

const (
	readyTimeout = 60 * time.Second
	stopTimeout  = 10 * time.Second
	logTailBytes = 64 << 10
	startTries   = 3
)

// process is one running server. exited is closed once the process is
// reaped; waitErr is valid after that.
type process struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	waitErr error
}

// launch starts the server process with its output going to logPath.
func launch(srv server, cfg *embed.Config, logPath string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create server log %s: %w", logPath, err)
	}
	defer logFile.Close()
	args := srv.args(cfg)
	fmt.Fprintf(logFile, "# %s %q\n", srv.bin, args)
	cmd := exec.Command(srv.bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Pdeathsig: the server dies with the test binary (e.g. on a -test.timeout panic).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s %v: %w", srv.bin, args, err)
	}
	p := &process{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// waitReady polls Status() on the client URL until it succeeds, the process
// exits or the deadline passes.
func (p *process) waitReady(cfg *embed.Config, deadline time.Time) error {
	endpoint := cfg.ListenClientUrls[0].String()
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return fmt.Errorf("process exited before it was ready: %v", p.waitErr)
		default:
		}
		if lastErr = status(endpoint); lastErr == nil {
			select {
			case <-p.exited: // someone else answered on our port
				return fmt.Errorf("process exited before it was ready: %v", p.waitErr)
			default:
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no successful Status() on %s within %s: %w", endpoint, readyTimeout, lastErr)
}

// status makes one Status() call against endpoint.
func status(endpoint string) error {
	_, err := statusOf(endpoint)
	return err
}

// statusOf returns endpoint's answer to one Status() call.
func statusOf(endpoint string) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: time.Second, Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	defer c.Close()
	st, err := c.Status(ctx, endpoint)
	if err != nil {
		return nil, fmt.Errorf("status %s: %w", endpoint, err)
	}
	return st, nil
}

// terminate sends SIGTERM and waits up to stopTimeout for the process to
// exit, then SIGKILLs it. It returns what is wrong: the server died during
// the test, did not stop on SIGTERM, exited with an error status, or reported
// a data race (a store built with -race).
func (p *process) terminate() []error {
	var problems []error
	select {
	case <-p.exited:
		problems = append(problems, fmt.Errorf("server process exited during the test: %v", p.waitErr))
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
			if err := exitError(p.waitErr); err != nil {
				problems = append(problems, fmt.Errorf("server exited with an error after SIGTERM: %w", err))
			}
		case <-time.After(stopTimeout):
			problems = append(problems, fmt.Errorf("server did not stop within %s of SIGTERM; killed it", stopTimeout))
			p.kill()
		}
	}
	if full, err := os.ReadFile(p.logPath); err == nil && bytes.Contains(full, []byte("WARNING: DATA RACE")) {
		problems = append(problems, fmt.Errorf("the server reported a data race (see its log below)"))
	}
	return problems
}

// exitError is nil for a clean exit after SIGTERM: status 0, or death by
// SIGTERM itself (etcd re-raises the signal).
func exitError(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
	}
	return err
}

// kill sends SIGKILL to the server's process group and waits for it.
func (p *process) kill() {
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = p.cmd.Process.Kill()
	}
	<-p.exited
}

// logTail returns at most logTailBytes from the end of the server log.
func (p *process) logTail() []byte {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return []byte(fmt.Sprintf("(read %s: %v)", p.logPath, err))
	}
	if len(b) > logTailBytes {
		b = append([]byte("...\n"), b[len(b)-logTailBytes:]...)
	}
	return b
}
