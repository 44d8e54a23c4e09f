package monitor

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quantyroot/quantykube/internal/runtime/attach"
)

// The test binary doubles as the monitor: with QK_MONITOR_HELPER=1 it runs Run with
// the flags after "--" (as `quantykube runtime monitor` would).
func TestMain(m *testing.M) {
	if os.Getenv("QK_MONITOR_HELPER") == "1" {
		args := os.Args[1:]
		for i, a := range args {
			if a == "--" {
				args = args[i+1:]
				break
			}
		}
		var o Options
		fs := flag.NewFlagSet("monitor", flag.ExitOnError)
		fs.StringVar(&o.ID, "id", "", "")
		fs.StringVar(&o.Bundle, "bundle", "", "")
		fs.StringVar(&o.Dir, "dir", "", "")
		fs.StringVar(&o.LogPath, "log-path", "", "")
		fs.StringVar(&o.Runc, "runc", "", "")
		fs.StringVar(&o.RuncRoot, "runc-root", "", "")
		fs.StringVar(&o.CgroupMemoryDir, "cgroup-memory-dir", "", "")
		fs.BoolVar(&o.Terminal, "terminal", false, "")
		fs.BoolVar(&o.Stdin, "stdin", false, "")
		fs.BoolVar(&o.StdinOnce, "stdin-once", false, "")
		fs.Parse(args)
		if err := Run(o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeRunc emulates `runc create`: it starts the bundle's "cmd" script with runc's stdio
// (the monitor's pipes), writes its pid and exits, leaving the process to the monitor.
const fakeRunc = `#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle=$2; shift 2;;
    --pid-file) pidfile=$2; shift 2;;
    --root|--log|--log-format|--console-socket) shift 2;;
    create) shift;;
    *) id=$1; shift;;
  esac
done
[ -f "$bundle/fail" ] && { echo '{"level":"error","msg":"fake create failure"}' > "$(dirname "$pidfile")/runc-create.log"; exit 1; }
exec 3<&0
sh "$bundle/cmd" <&3 3<&- &
echo $! > "$pidfile"
`

func setup(t *testing.T, script string) (Options, string) {
	t.Helper()
	dir := t.TempDir()
	runc := filepath.Join(dir, "runc")
	os.WriteFile(runc, []byte(fakeRunc), 0o755)
	bundle := filepath.Join(dir, "bundle")
	os.MkdirAll(bundle, 0o755)
	os.WriteFile(filepath.Join(bundle, "cmd"), []byte(script), 0o644)
	cdir := filepath.Join(dir, "c")
	os.MkdirAll(cdir, 0o755)
	t.Setenv("QK_MONITOR_HELPER", "1")
	return Options{ID: "c1", Bundle: bundle, Dir: cdir, LogPath: filepath.Join(dir, "logs", "c1.log"), Runc: runc, RuncRoot: dir}, bundle
}

// Waits of these tests: for the monitor to record an exit, for its attach socket.
const (
	exitFileTimeout = 10 * time.Second
	socketTimeout   = 2 * time.Second
	pollInterval    = 20 * time.Millisecond
)

func waitExitFile(t *testing.T, dir string) Exit {
	t.Helper()
	var e Exit
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, exitFileTimeout, true, func(context.Context) (bool, error) {
		var ok bool
		var err error
		e, ok, err = ReadExit(dir)
		return ok, err
	})
	if err != nil {
		t.Fatalf("no exit file within %s: %v", exitFileTimeout, err)
	}
	return e
}

func TestMonitorLogsAndExitCode(t *testing.T) {
	// (The sleep stands in for runc start: a real init cannot exit before runc create returns.)
	o, _ := setup(t, "sleep 0.3; echo out1; echo err1 >&2; printf partial; exit 7\n")
	pid, err := Spawn(os.Args[0], []string{"-test.run=^$", "--"}, o)
	if err != nil || pid <= 0 {
		t.Fatalf("spawn: pid %d err %v", pid, err)
	}
	e := waitExitFile(t, o.Dir)
	if e.Code != 7 || e.FinishedAt.IsZero() {
		t.Fatalf("exit %+v", e)
	}
	b, err := os.ReadFile(o.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	for _, want := range []string{" stdout F out1\n", " stderr F err1\n", " stdout F partial\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestMonitorReportsCreateError(t *testing.T) {
	o, bundle := setup(t, "exit 0\n")
	os.WriteFile(filepath.Join(bundle, "fail"), nil, 0o644)
	_, err := Spawn(os.Args[0], []string{"-test.run=^$", "--"}, o)
	if err == nil || !strings.Contains(err.Error(), "fake create failure") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(o.LogPath); !os.IsNotExist(err) {
		t.Fatalf("failed create left its log file: %v", err)
	}
}

func TestMonitorAttachStdinAndReopen(t *testing.T) {
	o, _ := setup(t, "read line; echo got:$line\n")
	o.Stdin, o.StdinOnce = true, true
	if _, err := Spawn(os.Args[0], []string{"-test.run=^$", "--"}, o); err != nil {
		t.Fatal(err)
	}
	var c net.Conn
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, socketTimeout, true, func(context.Context) (bool, error) {
		var derr error
		c, derr = net.Dial("unix", filepath.Join(o.Dir, AttachSocketName))
		return derr == nil, nil
	})
	if err != nil {
		t.Fatalf("attach socket not there within %s: %v", socketTimeout, err)
	}
	defer c.Close()
	// Reopen after a rotation: the old file is renamed, new output goes to a new file.
	os.Rename(o.LogPath, o.LogPath+".1")
	attach.WriteFrame(c, attach.ReopenLog, nil)
	if typ, data, err := attach.ReadFrame(c); err != nil || typ != attach.Ack || len(data) != 0 {
		t.Fatalf("reopen ack %c %q %v", typ, data, err)
	}
	attach.WriteFrame(c, attach.Stdin, []byte("hello\n"))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	typ, data, err := attach.ReadFrame(c)
	if err != nil || typ != attach.Stdout || string(data) != "got:hello\n" {
		ml, _ := os.ReadFile(filepath.Join(o.Dir, "monitor.log"))
		t.Fatalf("attach output %c %q %v (monitor log: %s)", typ, data, err, ml)
	}
	if e := waitExitFile(t, o.Dir); e.Code != 0 {
		t.Fatalf("exit %+v", e)
	}
	b, _ := os.ReadFile(o.LogPath)
	if !strings.Contains(string(b), "stdout F got:hello") {
		t.Fatalf("reopened log lacks output: %q", b)
	}
}
