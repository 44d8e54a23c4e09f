package monitor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quantyroot/quantykube/internal/runtime/attach"
	"github.com/quantyroot/quantykube/internal/runtime/console"
	"github.com/quantyroot/quantykube/internal/runtime/criolog"
	"github.com/quantyroot/quantykube/internal/runtime/runc"
)

// File names inside the container's state directory.
const (
	AttachSocketName = "attach.sock"
	PidFileName      = "pid"
	consoleName      = "console.sock"
	runcLogName      = "runc-create.log"
)

// SyncFD is the fd on which the monitor reports "ok <pid>" or "error <text>" once.
const SyncFD = 3

type mon struct {
	o    Options
	sink *criolog.Sink
	log  *os.File

	stdin   io.WriteCloser // nil when the container has no stdin
	stdinMu sync.Mutex
	pty     *os.File

	clientsMu sync.Mutex
	clients   map[net.Conn]struct{}
}

// Run is the monitor's main. It returns after the container has exited and its exit was recorded.
func Run(o Options) error {
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE, syscall.SIGTERM)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become subreaper: %w", err)
	}
	syncPipe := os.NewFile(SyncFD, "sync")
	m := &mon{o: o, clients: map[net.Conn]struct{}{}}
	pid, outputs, err := m.create()
	if err != nil {
		fmt.Fprintf(syncPipe, "error %s", err)
		syncPipe.Close()
		return err
	}
	// The attach socket exists before the runtime hears "ok": an Attach right after
	// CreateContainer must find it.
	l, err := net.Listen("unix", filepath.Join(o.Dir, AttachSocketName))
	if err != nil {
		slog.Error("listen attach socket", "err", err)
	} else {
		go m.serve(l)
	}
	fmt.Fprintf(syncPipe, "ok %d", pid)
	syncPipe.Close()
	status, reaped := waitFor(pid)
	e := Exit{Code: exitCode(status), FinishedAt: time.Now().UTC()}
	if !reaped {
		// Not our child any more (should not happen): the status is unknowable.
		e.Code, e.Reason = 255, "ExitStatusUnknown"
	}
	if o.CgroupMemoryDir != "" && oomKilled(o.CgroupMemoryDir) {
		e.Reason = "OOMKilled"
	}
	// Output may still be buffered in the pipes; give the copiers a moment to drain it.
	drained := make(chan struct{})
	go func() { outputs.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(outputDrainTimeout):
	}
	m.sink.Swap(nil)
	if m.log != nil {
		m.log.Close()
	}
	if err := WriteExit(o.Dir, e); err != nil {
		return err
	}
	if l != nil {
		l.Close()
	}
	m.closeClients()
	return nil
}

// create runs `runc create` and returns the container's init pid and a WaitGroup that
// is done when the output streams reached EOF.
func (m *mon) create() (int, *sync.WaitGroup, error) {
	_, statErr := os.Stat(m.o.LogPath)
	pid, outputs, err := m.runCreate()
	if err != nil && m.o.LogPath != "" && os.IsNotExist(statErr) {
		// A failed create leaves no empty log file of ours behind.
		if m.log != nil {
			m.log.Close()
		}
		os.Remove(m.o.LogPath)
	}
	return pid, outputs, err
}

// consoleTimeout bounds runc's handing over a container's terminal after create.
const consoleTimeout = 10 * time.Second

// outputDrainTimeout bounds copying the output still buffered after the container exited.
const outputDrainTimeout = 2 * time.Second

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

func (m *mon) copyOut(name string, typ byte, r io.Reader) {
	w := m.sink.Stream(name)
	defer w.Close()
	buf := make([]byte, 32*1024)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			m.broadcast(typ, buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// clientWriteTimeout bounds a write to an attached client; a slower client is dropped.
const clientWriteTimeout = 5 * time.Second

func (m *mon) broadcast(typ byte, data []byte) {
	m.clientsMu.Lock()
	defer m.clientsMu.Unlock()
	for c := range m.clients {
		c.SetWriteDeadline(time.Now().Add(clientWriteTimeout))
		if err := attach.WriteFrame(c, typ, data); err != nil {
			c.Close()
			delete(m.clients, c)
		}
	}
}

func (m *mon) closeClients() {
	m.clientsMu.Lock()
	defer m.clientsMu.Unlock()
	for c := range m.clients {
		c.Close()
		delete(m.clients, c)
	}
}

func (m *mon) serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go m.handle(c)
	}
}

// handle serves one client. A client that sends only ReopenLog is a control client;
// any other client is attached and receives the output from now on.
func (m *mon) handle(c net.Conn) {
	defer c.Close()
	registered := false
	defer func() {
		if !registered {
			return
		}
		m.clientsMu.Lock()
		delete(m.clients, c)
		m.clientsMu.Unlock()
		if m.o.StdinOnce && !m.o.Terminal {
			m.closeStdin()
		}
	}()
	for {
		typ, data, err := attach.ReadFrame(c)
		if err != nil {
			return
		}
		switch typ {
		case attach.ReopenLog:
			msg := ""
			if err := m.reopen(); err != nil {
				msg = err.Error()
			}
			m.clientsMu.Lock()
			attach.WriteFrame(c, attach.Ack, []byte(msg))
			m.clientsMu.Unlock()
			continue
		case attach.Stdin, attach.CloseStdin, attach.Resize:
		default:
			continue
		}
		if !registered {
			registered = true
			m.clientsMu.Lock()
			m.clients[c] = struct{}{}
			m.clientsMu.Unlock()
		}
		switch typ {
		case attach.Stdin:
			m.stdinMu.Lock()
			if m.stdin != nil {
				m.stdin.Write(data)
			}
			m.stdinMu.Unlock()
		case attach.CloseStdin:
			if m.o.StdinOnce {
				m.closeStdin()
			}
		case attach.Resize:
			if w, h, ok := attach.ParseResize(data); ok && m.pty != nil {
				console.Resize(m.pty, w, h)
			}
		}
	}
}

func (m *mon) closeStdin() {
	m.stdinMu.Lock()
	defer m.stdinMu.Unlock()
	if m.stdin != nil && m.pty == nil {
		m.stdin.Close()
		m.stdin = nil
	}
}

func (m *mon) reopen() error {
	if m.o.LogPath == "" {
		return nil
	}
	f, err := os.OpenFile(m.o.LogPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("reopen log %s: %w", m.o.LogPath, err)
	}
	old := m.sink.Swap(f)
	m.log = f
	if oc, ok := old.(io.Closer); ok && old != nil {
		oc.Close()
	}
	return nil
}

// waitFor reaps children (we are a subreaper) until pid exits, and returns its status;
// reaped is false when no child is left without pid having been seen.
func waitFor(pid int) (ws unix.WaitStatus, reaped bool) {
	for {
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return ws, false
		}
		if got == pid {
			return ws, true
		}
	}
}

func exitCode(ws unix.WaitStatus) int32 {
	if ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(ws.ExitStatus())
}

// oomKilled reports whether the memory cgroup at dir recorded an OOM kill.
func oomKilled(dir string) bool {
	for _, name := range []string{"memory.oom_control", "memory.events"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && f[0] == "oom_kill" && f[1] != "0" {
				return true
			}
		}
	}
	return false
}
