package storee2e

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	// demoTimeout bounds the whole demo (a kube-apiserver start on a busy
	// 2-core machine included).
	demoTimeout = 6 * time.Minute
	// demoStopBound bounds the demo's stop, from its "stopping" line to its
	// exit: kube-controller-manager, kube-apiserver and the store each get
	// SIGTERM and at most 15 s before SIGKILL, and a stop in the right order
	// (the API server before its storage) takes a few seconds.
	demoStopBound = 30 * time.Second
)

// demoWorkDir is the demo's temporary directory as its "done" line names it.
var demoWorkDir = regexp.MustCompile(`(/tmp/quantykube-demo\.[A-Za-z0-9]+) removed`)

// TestDemoStore runs scripts/demo-store.sh (the store, a kube-apiserver and
// a kube-controller-manager on loopback, driven by kubectl) with this run's
// binaries and checks how it ends: it exits 0, stops everything within
// demoStopBound of saying it stops (it once said "done" and then waited more
// than 5 minutes for kube-apiserver, whose storage it had stopped first),
// each process on SIGTERM (none needs the SIGKILL that bounds the wait),
// prints "done" only after, and leaves no process of its own and no
// directory behind.
func TestDemoStore(t *testing.T) {
	if serverKind(t) != "store" || clusterMembers() > 1 {
		t.Skip("the demo runs one quantykube store: it runs once, with QK_STORE_CMD=store and without QK_STORE_MEMBERS")
	}
	env := append(os.Environ(),
		envStoreBin+"="+serverBin(t, "store"),
		envKubeAPIServer+"="+kubeAPIServerBin(t),
		envKubeCM+"="+kubeControllerManagerBin(t),
		"KUBECTL="+kubectlBin(t),
	)
	ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("..", "..", "scripts", "demo-store.sh"))
	cmd.Env = env
	// Its own process group, so a demo that overruns is killed with
	// everything it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("start demo-store.sh: %v", err)
	}
	go func() { pw.CloseWithError(cmd.Wait()) }()

	var out strings.Builder
	var stopping time.Time
	done := false
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		switch {
		case strings.Contains(line, "== stopping"):
			stopping = time.Now()
		case strings.Contains(line, "== done:"):
			done = !stopping.IsZero()
		}
	}
	exited := time.Now()
	runErr := sc.Err()
	if runErr != nil || ctx.Err() != nil {
		t.Fatalf("demo-store.sh failed (%v; context: %v):\n%s", runErr, ctx.Err(), out.String())
	}
	if stopping.IsZero() || !done {
		t.Fatalf("demo-store.sh did not say it stops and then that it is done:\n%s", out.String())
	}
	if strings.Contains(out.String(), "after SIGTERM; SIGKILL") {
		t.Errorf("demo-store.sh had to SIGKILL a process: stopped newest first, each exits on SIGTERM (kube-apiserver before its store):\n%s", out.String())
	}
	took := exited.Sub(stopping)
	t.Logf("demo-store.sh stopped kube-controller-manager, kube-apiserver and the store and exited %v after saying it stops", took.Round(time.Millisecond))
	if took > demoStopBound {
		t.Errorf("the demo's stop took %v, over %v:\n%s", took.Round(time.Millisecond), demoStopBound, out.String())
	}
	m := demoWorkDir.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("the done line names no removed directory:\n%s", out.String())
	}
	if _, err := os.Stat(m[1]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is still there (stat: %v)", m[1], err)
	}
	if left := processesMentioning(t, m[1]); len(left) > 0 {
		t.Errorf("processes of the demo still run after it exited:\n%s", strings.Join(left, "\n"))
	}
}

// processesMentioning lists the processes whose command line contains s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil { // gone meanwhile
			continue
		}
		if cl := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(cl, s) {
			out = append(out, filepath.Base(filepath.Dir(p))+": "+cl)
		}
	}
	return out
}
