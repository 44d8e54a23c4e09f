package storee2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// commandTimeout bounds every foreground command a test runs.
const commandTimeout = 60 * time.Second

// cmdResult is what a finished command printed.
type cmdResult struct {
	Stdout, Stderr string
	Err            error // nil, or the exit error (non-zero status, timeout)
}

// String is for failure messages.
func (r cmdResult) String() string {
	return fmt.Sprintf("err=%v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
}

// runCmd runs bin with args (and stdin when not empty) to completion or
// commandTimeout and returns its output.
func runCmd(stdin, bin string, env []string, args ...string) cmdResult {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s %s: timed out after %v: %w", filepath.Base(bin), strings.Join(args, " "), commandTimeout, err)
	}
	return cmdResult{Stdout: out.String(), Stderr: errb.String(), Err: err}
}

// bgProc is a background process whose stdout is read by the test and whose
// stderr goes to a file printed when the test fails. t.Cleanup kills it.
type bgProc struct {
	Name   string
	cmd    *exec.Cmd
	Stdout io.Reader
	pipeW  *os.File
	errLog string
	done   chan struct{}
	once   sync.Once
}

// startBg starts bin in the background. When logPath is not empty both stdout
// and stderr go there (Stdout is then nil); otherwise Stdout is a pipe.
func startBg(t testing.TB, name, logPath, bin string, args ...string) *bgProc {
	t.Helper()
	return startProc(t, name, logPath, nil, bin, args...)
}

// startBgStdin is startBg with stdout piped and stdin read from stdin.
func startBgStdin(t testing.TB, name string, stdin io.Reader, bin string, args ...string) *bgProc {
	t.Helper()
	return startProc(t, name, "", stdin, bin, args...)
}

func startProc(t testing.TB, name, logPath string, stdin io.Reader, bin string, args ...string) *bgProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &bgProc{Name: name, cmd: cmd, done: make(chan struct{})}
	if logPath == "" {
		logPath = filepath.Join(t.TempDir(), name+".stderr")
		// An os.Pipe rather than cmd.StdoutPipe: Wait must not close the read
		// end while the test still reads what the process printed.
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatalf("pipe for %s: %v", name, err)
		}
		cmd.Stdout = w
		p.Stdout, p.pipeW = r, w
		t.Cleanup(func() { r.Close() })
	}
	p.errLog = logPath
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("create %s: %v", logPath, err)
	}
	cmd.Stderr = f
	if p.Stdout == nil {
		cmd.Stdout = f
	}
	err = cmd.Start()
	if p.pipeW != nil {
		p.pipeW.Close() // the child holds its own copy
	}
	if err != nil {
		f.Close()
		t.Fatalf("start %s (%s): %v", name, bin, err)
	}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			dumpFileTail(t, name+" log", logPath, 80)
		}
		keepLog(t, logPath)
	})
	return p
}

// Kill sends SIGKILL to the process group and waits (at most 15 s) for the
// process to be reaped.
func (p *bgProc) Kill() {
	p.once.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	})
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
	}
}

// Exited reports whether the process has ended.
func (p *bgProc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
