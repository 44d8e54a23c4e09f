package monitor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quantyroot/quantykube/internal/runtime/attach"
	"github.com/quantyroot/quantykube/internal/runtime/console"
	"github.com/quantyroot/quantykube/internal/runtime/criolog"
	"github.com/quantyroot/quantykube/internal/runtime/runc"
)

// consoleTimeout bounds runc's handing over a container's terminal after create.
const consoleTimeout = 10 * time.Second

// runCreate runs `runc create` with the container's stdio (pipes, or a terminal runc hands
// over on the console socket) and returns the init pid from runc's pid file.
func (m *mon) runCreate() (int, *sync.WaitGroup, error) {
	o := m.o
	m.sink = criolog.NewSink(nil)
	if err := m.openLog(); err != nil {
		return 0, nil, err
	}
	r := runc.Runc{Path: o.Runc, Root: o.RuncRoot}
	pidFile := filepath.Join(o.Dir, PidFileName)
	args := []string{"--log", filepath.Join(o.Dir, runcLogName), "--log-format", "json",
		"create", "--bundle", o.Bundle, "--pid-file", pidFile}
	var outputs sync.WaitGroup
	var childEnds []*os.File
	var cons *console.Listener
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("open /dev/null: %w", err)
	}
	defer devnull.Close()
	cmd := r.Command(context.Background())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	if o.Terminal {
		if cons, err = console.Listen(filepath.Join(o.Dir, consoleName)); err != nil {
			return 0, nil, err
		}
		defer cons.Close()
		args = append(args, "--console-socket", cons.Path)
	} else if childEnds, err = m.pipeStdio(cmd, &outputs); err != nil {
		return 0, nil, err
	}
	cmd.Args = append(cmd.Args, append(args, o.ID)...)
	if err := cmd.Start(); err != nil {
		return 0, nil, fmt.Errorf("start runc create: %w", err)
	}
	var term <-chan accepted
	if cons != nil {
		term = acceptAsync(cons)
	}
	waitErr := cmd.Wait()
	for _, f := range childEnds {
		f.Close()
	}
	if waitErr != nil {
		return 0, nil, fmt.Errorf("runc create: %s", runcError(filepath.Join(o.Dir, runcLogName), waitErr))
	}
	if term != nil {
		if err := m.takeTerminal(term, &outputs); err != nil {
			return 0, nil, err
		}
	}
	pid, err := readPid(pidFile)
	if err != nil {
		return 0, nil, err
	}
	return pid, &outputs, nil
}

// openLog opens the CRI log (none when LogPath is empty) as the sink's file.
func (m *mon) openLog() error {
	if m.o.LogPath == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(m.o.LogPath), 0o755); err != nil {
		return fmt.Errorf("create log directory: %w", err)
	}
	f, err := os.OpenFile(m.o.LogPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("open container log %s: %w", m.o.LogPath, err)
	}
	m.log = f
	m.sink.Swap(f)
	return nil
}

// pipeStdio gives cmd pipes for stdin (when the container has one), stdout and stderr,
// and copies the output ends into the log and to attached clients. It returns the child's
// ends, to close once runc create has passed them on.
func (m *mon) pipeStdio(cmd *exec.Cmd, outputs *sync.WaitGroup) ([]*os.File, error) {
	var childEnds []*os.File
	if m.o.Stdin {
		pr, pw, err := os.Pipe()
		if err != nil {
			return childEnds, fmt.Errorf("stdin pipe: %w", err)
		}
		cmd.Stdin = pr
		childEnds = append(childEnds, pr)
		m.stdin = pw
	}
	for _, s := range []struct {
		name string
		typ  byte
		dst  *io.Writer
	}{{"stdout", attach.Stdout, &cmd.Stdout}, {"stderr", attach.Stderr, &cmd.Stderr}} {
		pr, pw, err := os.Pipe()
		if err != nil {
			return childEnds, fmt.Errorf("%s pipe: %w", s.name, err)
		}
		*s.dst = pw
		childEnds = append(childEnds, pw)
		outputs.Add(1)
		go func(name string, typ byte, r io.Reader) {
			defer outputs.Done()
			m.copyOut(name, typ, r)
		}(s.name, s.typ, pr)
	}
	return childEnds, nil
}

type accepted struct {
	f   *os.File
	err error
}

// acceptAsync accepts the terminal runc sends on cons.
func acceptAsync(cons *console.Listener) <-chan accepted {
	ch := make(chan accepted, 1)
	go func() { f, err := cons.Accept(); ch <- accepted{f, err} }()
	return ch
}

// takeTerminal waits for the terminal's master and copies its output.
func (m *mon) takeTerminal(term <-chan accepted, outputs *sync.WaitGroup) error {
	var a accepted
	select {
	case a = <-term:
	case <-time.After(consoleTimeout):
		a.err = fmt.Errorf("runc sent no terminal within %s", consoleTimeout)
	}
	if a.err != nil {
		return a.err
	}
	m.pty = a.f
	if m.o.Stdin {
		m.stdin = a.f
	}
	outputs.Add(1)
	go func() {
		defer outputs.Done()
		m.copyOut("stdout", attach.Stdout, a.f)
	}()
	return nil
}

func readPid(pidFile string) (int, error) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, fmt.Errorf("read runc pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("parse runc pid file %q: %w", b, err)
	}
	return pid, nil
}

// runcError returns the last error message runc logged, or fallback's text.
func runcError(logPath string, fallback error) string {
	f, err := os.Open(logPath)
	if err != nil {
		return fallback.Error()
	}
	defer f.Close()
	msg := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var l struct{ Level, Msg string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Level == "error" {
			msg = l.Msg
		}
	}
	if msg == "" {
		return fallback.Error()
	}
	return msg
}
