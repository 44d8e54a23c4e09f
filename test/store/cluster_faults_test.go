package storee2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// walFiles returns a member's WAL segment files, oldest first (the store
// keeps raft's WAL in <data-dir>/raft/wal, etcd in <data-dir>/member/wal).
func walFiles(t *testing.T, m *server) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{filepath.Join(m.DataDir, "raft", "wal"), filepath.Join(m.DataDir, "member", "wal")} {
		fs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
		files = append(files, fs...)
	}
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatalf("no WAL files under %s", m.DataDir)
	}
	return files
}

// TestClusterCorruptWAL: a member's WAL is damaged while it is down (bytes in
// the middle of its records overwritten). On restart it must stop with one
// clear error line that names the WAL and what to do; the other two keep
// taking writes.
func TestClusterCorruptWAL(t *testing.T) {
	c := startCluster(t, 3, clusterOptions{})
	cl := c.Client()
	defer cl.Close()
	for i := 0; i < 200; i++ {
		put(t, cl, fmt.Sprintf("wal/%d", i), strings.Repeat("x", 512))
	}
	c.waitCaughtUp(30 * time.Second)
	victim := c.Members[2]
	victim.Kill9()
	wal := walFiles(t, victim)[0]
	f, err := os.OpenFile(wal, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strings.Repeat("\xde\xad\xbe\xef", 256)), 40*1024); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Logf("overwrote 1 KiB at offset 40 KiB of %s", wal)
	victim.startProc()
	select {
	case <-victim.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("%s kept running on a corrupt WAL", victim.Name)
	}
	victim.mu.Lock()
	exitErr := victim.exitErr
	victim.proc = nil
	victim.mu.Unlock()
	if exitErr == nil {
		t.Fatalf("%s exited with status 0 on a corrupt WAL", victim.Name)
	}
	line := lastErrorLine(t, victim.logPath)
	t.Logf("%s stopped (%v) with: %s", victim.Name, exitErr, line)
	if !strings.Contains(strings.ToLower(line), "wal") {
		t.Fatalf("the error line does not name the WAL: %q", line)
	}
	for i := 0; i < 20; i++ {
		putRetry(t, cl, fmt.Sprintf("wal/after/%d", i), "v")
	}
}

// lastErrorLine returns the last line of a log that reads like an error.
func lastErrorLine(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var last string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "=====") {
			continue
		}
		if strings.Contains(strings.ToLower(l), "error") || strings.Contains(l, "panic") || strings.HasPrefix(l, "quantykube:") || strings.HasPrefix(l, "goroutine ") {
			last = l
		}
	}
	return last
}

// TestClusterDiskFull: one member's data dir lives on a small tmpfs that
// fills up under large writes. That member must stop with one clear error
// line (naming the directory, no panic); the other two keep taking writes.
func TestClusterDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	c := startClusterDeferred(t, 3, clusterOptions{})
	victim := c.Members[2]
	if err := os.MkdirAll(victim.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// etcd's WAL preallocates 64 MiB segments: room for the first and a bit.
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=100m", "tmpfs", victim.DataDir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", victim.DataDir).Run() })
	c.start()
	cl := c.Client()
	defer cl.Close()
	big := strings.Repeat("f", 512<<10)
	deadline := time.Now().Add(3 * time.Minute)
	for i := 0; ; i++ {
		// A write in flight on the member that stops may fail; the next
		// one goes to another member.
		putRetry(t, cl, fmt.Sprintf("full/%d", i%400), big)
		select {
		case <-victim.Exited():
			victim.mu.Lock()
			exitErr := victim.exitErr
			victim.proc = nil
			victim.mu.Unlock()
			line := lastErrorLine(t, victim.logPath)
			t.Logf("%s stopped after %d writes of 512 KiB (%v): %s", victim.Name, i, exitErr, line)
			if strings.Contains(line, "panic") || strings.HasPrefix(line, "goroutine ") || !strings.Contains(line, "no space left") {
				t.Fatalf("the member did not stop with one clear line about the full disk: %q", line)
			}
			for j := 0; j < 20; j++ {
				putRetry(t, cl, fmt.Sprintf("full/after/%d", j), "v")
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the member with a full disk kept running")
		}
	}
}
