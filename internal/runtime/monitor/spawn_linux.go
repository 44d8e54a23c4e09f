package monitor

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Spawn starts a monitor: exe with argv prefix (e.g. ["runtime", "monitor"]) and o's flags.
// It returns once runc create finished, with the container's init pid, or runc's error.
// The monitor runs in a new session so that signals to the runtime do not reach it; it is
// reaped by a background goroutine while the runtime lives, and by init after that.
func Spawn(exe string, prefix []string, o Options) (int, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, fmt.Errorf("sync pipe: %w", err)
	}
	defer pr.Close()
	logf, err := os.OpenFile(filepath.Join(o.Dir, "monitor.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		pw.Close()
		return 0, fmt.Errorf("open monitor log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(exe, append(append([]string{}, prefix...), o.Args()...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{pw} // becomes fd 3 == SyncFD
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = o.Dir
	if err := cmd.Start(); err != nil {
		pw.Close()
		return 0, fmt.Errorf("start monitor: %w", err)
	}
	pw.Close()
	go cmd.Wait()
	b, err := io.ReadAll(pr)
	if err != nil {
		return 0, fmt.Errorf("read monitor sync: %w", err)
	}
	msg := string(b)
	switch {
	case strings.HasPrefix(msg, "ok "):
		pid, err := strconv.Atoi(strings.TrimPrefix(msg, "ok "))
		if err != nil {
			return 0, fmt.Errorf("monitor sent bad pid %q", msg)
		}
		return pid, nil
	case strings.HasPrefix(msg, "error "):
		return 0, fmt.Errorf("%s", strings.TrimPrefix(msg, "error "))
	default:
		lb, _ := os.ReadFile(filepath.Join(o.Dir, "monitor.log"))
		return 0, fmt.Errorf("monitor exited without reporting (log: %s)", strings.TrimSpace(string(lb)))
	}
}
