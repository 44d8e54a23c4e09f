// Package server starts and stops the three datastores the benchmark compares
// (QuantyKube's store, etcd, kine on SQLite) as child processes, each on free
// loopback ports with a fresh data directory, fsync on.
//
// Invariants: a Server returned by Start answers a linearizable Get; Stop
// always reaps the process (SIGTERM, then SIGKILL after 15 s); nothing listens
// on a non-loopback address.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Kinds of server, in the order the benchmark interleaves them.
const (
	QuantyKube = "quantykube"
	Etcd       = "etcd"
	Kine       = "kine"
	// QuantyKubePprof is the store built with a pprof endpoint
	// (bench/cmd/qkstore-pprof); used only for profiling.
	QuantyKubePprof = "quantykube-pprof"
)

// Kinds lists every kind, in run order.
var Kinds = []string{QuantyKube, Etcd, Kine}

// EtcdQuotaBytes is the backend quota every benchmarked etcd is started
// with (--quota-backend-bytes): 8 GiB, the most etcd's documentation
// suggests. etcd's default, 2 GiB, raised its NOSPACE alarm ("mvcc: database
// space exceeded") while a 1M-key run of 1 KiB values updated its keys (6
// December), so the run measured the alarm rather than etcd. The quota is a
// limit only; it changes nothing below it.
const EtcdQuotaBytes = 8 << 30

// Binaries holds the executables of each kind.
type Binaries struct {
	Store, Etcd, Kine string
	StorePprof        string   // bench/cmd/qkstore-pprof, for profiling only
	StoreArgs         []string // extra flags for the store (both builds), e.g. --cache-bytes
}

// Server is one running datastore.
type Server struct {
	Kind     string
	Endpoint string // host:port of the etcd v3 API, plain gRPC
	DataDir  string
	// PprofURL is the pprof base URL (QuantyKubePprof only).
	PprofURL string
	cmd      *exec.Cmd
	done     chan error
	log      *os.File
}

// Start launches a server of kind with an empty data directory under dir
// and waits until it serves reads on a port it owns. When another process
// took the chosen port first (a race on a shared machine), it retries on
// new ports.
func Start(ctx context.Context, kind string, bins Binaries, dir string) (*Server, error) {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		var s *Server
		s, err = start(ctx, kind, bins, dir)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errPortTaken) {
			return nil, err
		}
		slog.Warn("port taken by another process; retrying on new ports", "kind", kind, "attempt", attempt)
		_ = os.RemoveAll(filepath.Join(dir, "data"))
	}
	return nil, err
}

// errPortTaken means the chosen port was bound by someone else.
var errPortTaken = errors.New("port taken by another process")

func start(ctx context.Context, kind string, bins Binaries, dir string) (*Server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Kind: kind, Endpoint: fmt.Sprintf("127.0.0.1:%d", port), DataDir: filepath.Join(dir, "data")}
	url := "http://" + s.Endpoint
	var args []string
	var bin string
	switch kind {
	case QuantyKube:
		bin = bins.Store
		args = []string{"store", "--name", "bench", "--data-dir", s.DataDir, "--listen-client-urls", url, "--log-level", "warn"}
	case QuantyKubePprof:
		pp, err := FreePort()
		if err != nil {
			return nil, err
		}
		bin = bins.StorePprof
		s.PprofURL = fmt.Sprintf("http://127.0.0.1:%d/debug/pprof", pp)
		args = []string{"--data-dir", s.DataDir, "--listen-client-urls", url, "--pprof", fmt.Sprintf("127.0.0.1:%d", pp)}
	case Etcd:
		peer, err := FreePort()
		if err != nil {
			return nil, err
		}
		purl := fmt.Sprintf("http://127.0.0.1:%d", peer)
		bin = bins.Etcd
		args = []string{"--name", "bench", "--data-dir", s.DataDir, "--listen-client-urls", url,
			"--advertise-client-urls", url, "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
			"--initial-cluster", "bench=" + purl, "--log-level", "warn", "--quota-backend-bytes", strconv.Itoa(EtcdQuotaBytes)}
	case Kine:
		bin = bins.Kine
		if err := os.MkdirAll(s.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", s.DataDir, err)
		}
		// Default endpoint (SQLite at ./db/state.db with kine's default DSN
		// options), so the data lives in the data dir: run kine there.
		args = []string{"--listen-address", s.Endpoint, "--metrics-bind-address", "0"}
	default:
		return nil, fmt.Errorf("unknown server kind %q; use %s, %s or %s", kind, QuantyKube, Etcd, Kine)
	}
	if bin == "" {
		return nil, fmt.Errorf("no binary for %s; pass its path to the harness", kind)
	}
	if kind == QuantyKube || kind == QuantyKubePprof {
		args = append(args, bins.StoreArgs...)
	}
	cmdDir := ""
	if kind == Kine {
		cmdDir = s.DataDir
	}
	if err := s.launch(bin, args, filepath.Join(dir, kind+".log"), cmdDir); err != nil {
		return nil, err
	}
	logf := s.log
	if err := s.waitReady(ctx, 60*time.Second); err != nil {
		s.Stop()
		if b, _ := os.ReadFile(logf.Name()); strings.Contains(string(b), "address already in use") {
			return nil, fmt.Errorf("%s on %s: %w", kind, s.Endpoint, errPortTaken)
		}
		return nil, fmt.Errorf("%s on %s did not become ready (log %s): %w", kind, s.Endpoint, logf.Name(), err)
	}
	if own, err := Listens(s.Pid(), port); err != nil || !own {
		s.Stop()
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s on %s: %w", kind, s.Endpoint, errPortTaken)
	}
	slog.Info("server ready", "kind", kind, "endpoint", s.Endpoint, "pid", s.cmd.Process.Pid)
	return s, nil
}

// launch starts bin with args, its output appended to logPath, in cmdDir
// ("" for the current directory), and reaps it in the background (s.done).
func (s *Server) launch(bin string, args []string, logPath, cmdDir string) error {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log of %s: %w", s.Kind, err)
	}
	s.log = logf
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.Dir = cmdDir
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", bin, err)
	}
	s.done = make(chan error, 1)
	go func() { s.done <- s.cmd.Wait() }()
	return nil
}

// Client returns a new etcd client of the server. The caller closes it.
func (s *Server) Client() (*clientv3.Client, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 10 * time.Second,
		Logger: zap.NewNop(), MaxCallRecvMsgSize: 1 << 30})
	if err != nil {
		return nil, fmt.Errorf("client of %s at %s: %w", s.Kind, s.Endpoint, err)
	}
	return c, nil
}

func (s *Server) waitReady(ctx context.Context, limit time.Duration) error {
	c, err := s.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(limit)
	for {
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("exited early: %v", err)
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = c.Get(cctx, "/bench/ready-probe")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Stop terminates the server and waits for it.
func (s *Server) Stop() error {
	defer s.log.Close()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return nil
	case <-time.After(15 * time.Second):
	}
	_ = s.cmd.Process.Kill()
	err := <-s.done
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return fmt.Errorf("stop %s: %w", s.Kind, err)
	}
	return nil
}
