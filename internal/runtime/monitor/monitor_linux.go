package monitor

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quantyroot/quantykube/internal/runtime/criolog"
)

// File names inside the container's state directory.
const (
	AttachSocketName = "attach.sock"
	PidFileName      = "pid"
	consoleName      = "console.sock"
	runcLogName      = "runc-create.log"
)

// outputDrainTimeout bounds copying the output still buffered after the container exited.
const outputDrainTimeout = 2 * time.Second

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
