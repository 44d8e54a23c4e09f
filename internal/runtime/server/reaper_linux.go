package server

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ReapOrphans runs until ctx ends. The runtime is a child subreaper (for terminal execs),
// so processes orphaned below it — children of execs in host-PID pods, daemonizing CNI
// plugins — become its children with nobody to wait for them. Every interval it reaps
// each zombie child that was already a zombie at the previous scan: os/exec waits for
// its own children as soon as they exit, so a zombie that lasted a whole interval is an
// orphan, and reaping it cannot steal a status somebody is waiting for.
func ReapOrphans(ctx context.Context, interval time.Duration) {
	seen := map[int]bool{}
	wait.UntilWithContext(ctx, func(context.Context) { seen = reapLingering(seen) }, interval)
}

// reapLingering reaps the zombie children in seen (zombies at the previous scan) and
// returns the zombies seen for the first time now.
func reapLingering(seen map[int]bool) map[int]bool {
	now := map[int]bool{}
	for _, pid := range zombieChildren() {
		if seen[pid] {
			var ws unix.WaitStatus
			if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil && got == pid {
				slog.Debug("reaped orphan", "pid", pid)
			}
			continue
		}
		now[pid] = true
	}
	return now
}

// zombieChildren lists this process's children in state Z.
func zombieChildren() []int {
	self := os.Getpid()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces, so cut at the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] != "Z" {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == self {
			out = append(out, pid)
		}
	}
	return out
}
