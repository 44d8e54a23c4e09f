package storee2e

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quantyroot/quantykube/test/ports"
)

// serverOptions tune one server under test.
type serverOptions struct {
	// NoFsync passes --unsafe-no-fsync (speed for tests that never crash).
	NoFsync bool
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
	// MoreClientURLs are listened on besides ClientURL (--listen-client-urls U1,U2).
	MoreClientURLs int
	// Kind, when set, is the server to start ("store" or "etcd") instead of
	// the one QK_STORE_CMD names.
	Kind string
	// DataDir, when set, is an existing data dir to start on (a restored
	// one) instead of a fresh one.
	DataDir string
	// Name and PeerURL, when set, are etcd's --name and peer URL (a data
	// dir made by `etcdutl snapshot restore` records both).
	Name, PeerURL string
}

// server is one server process under test (quantykube store or etcd) with its
// own data directory, ports and PKI. Invariants: at most one process runs at a
// time; DataDir survives restarts; every process is killed by t.Cleanup.
type server struct {
	t          testing.TB
	Kind       string // "store" or "etcd"
	bin        string
	Name       string
	DataDir    string
	ClientURL  string   // https://127.0.0.1:P
	MoreURLs   []string // further client URLs (serverOptions.MoreClientURLs)
	MetricsURL string   // http://127.0.0.1:M
	peerURL    string   // etcd only
	PKI        *pki
	ServerPair keyPair
	ClientPair keyPair // trusted by the server
	opts       serverOptions
	logPath    string
	// cluster is set when the server is member 1 of a cluster (QK_STORE_MEMBERS).
	cluster *cluster
	// clusterArgs, when set, are the clustering flags of a cluster member
	// (cluster_helpers_test.go); they replace the single etcd's peer flags.
	clusterArgs []string

	mu      sync.Mutex
	proc    *exec.Cmd
	exited  chan struct{} // closed when proc has been waited for
	exitErr error         // what Wait returned; read only after exited is closed
	starts  int
}

// readyTimeout bounds how long a (re)started server may take to serve a Range.
const readyTimeout = 60 * time.Second

// startServer starts the server chosen by QK_STORE_CMD on a fresh data dir and
// waits until it serves a Range over TLS.
func startServer(t testing.TB, opts serverOptions) *server {
	t.Helper()
	if n := clusterMembers(); n > 1 && opts.Kind == "" {
		return startClusterServer(t, n, opts)
	}
	kind := cmp.Or(opts.Kind, serverKind(t))
	bin := serverBin(t, kind)
	dir := t.TempDir()
	p := newPKI(t, filepath.Join(dir, "pki"), "qk-test-ca")
	s := &server{
		t:          t,
		Kind:       kind,
		bin:        bin,
		Name:       cmp.Or(opts.Name, "qk-test"),
		DataDir:    cmp.Or(opts.DataDir, filepath.Join(dir, "data")),
		ClientURL:  "https://" + freeAddr(t),
		MetricsURL: "http://" + freeAddr(t),
		PKI:        p,
		ServerPair: p.issue(t, "server", loopbackServer("qk-store")),
		ClientPair: p.issue(t, "client", certSpec{CN: "root", Client: true}),
		opts:       opts,
		logPath:    filepath.Join(dir, "server.log"),
	}
	if kind == "etcd" {
		s.peerURL = cmp.Or(opts.PeerURL, "http://"+freeAddr(t))
	}
	for i := 0; i < opts.MoreClientURLs; i++ {
		s.MoreURLs = append(s.MoreURLs, "https://"+freeAddr(t))
	}
	t.Cleanup(func() {
		s.Kill9()
		if t.Failed() {
			s.dumpLog()
		}
		keepLog(t, s.logPath)
	})
	s.Start()
	return s
}

// args is the command line, with etcd's flag names (the store's contract).
func (s *server) args() []string {
	var a []string
	if s.Kind == "store" {
		a = append(a, "store")
	}
	a = append(a,
		"--name", s.Name,
		"--data-dir", s.DataDir,
		"--listen-client-urls", strings.Join(append([]string{s.ClientURL}, s.MoreURLs...), ","),
		"--advertise-client-urls", s.ClientURL,
		"--cert-file", s.ServerPair.Cert,
		"--key-file", s.ServerPair.Key,
		"--trusted-ca-file", s.PKI.CAFile,
		"--client-cert-auth",
		"--listen-metrics-urls", s.MetricsURL,
	)
	if s.clusterArgs != nil {
		a = append(a, s.clusterArgs...)
	} else if s.Kind == "etcd" {
		// A private peer port, so parallel tests and other sessions never clash on 2380.
		a = append(a,
			"--listen-peer-urls", s.peerURL,
			"--initial-advertise-peer-urls", s.peerURL,
			"--initial-cluster", s.Name+"="+s.peerURL,
		)
	}
	if s.opts.NoFsync {
		a = append(a, "--unsafe-no-fsync")
	}
	return append(a, s.opts.ExtraArgs...)
}

// Start starts the process on DataDir and waits until it is ready.
func (s *server) Start() {
	s.t.Helper()
	s.startProc()
	s.waitReady()
}

// startProc starts the process on DataDir without waiting (a cluster member
// is ready only once a quorum runs).
func (s *server) startProc() {
	s.t.Helper()
	s.mu.Lock()
	if s.proc != nil {
		s.mu.Unlock()
		s.t.Fatalf("start %s: already running (pid %d)", s.Kind, s.proc.Process.Pid)
	}
	s.starts++
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.mu.Unlock()
		s.t.Fatalf("open server log: %v", err)
	}
	fmt.Fprintf(logf, "===== start %d: %s %s\n", s.starts, s.bin, strings.Join(s.args(), " "))
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		s.mu.Unlock()
		s.t.Fatalf("start %s: %v", s.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logf, "===== exit %d: %v\n", s.starts, err)
		logf.Close()
		s.exitErr = err // read only after <-exited (Kill9 holds mu while it waits)
		close(exited)
	}()
	s.proc, s.exited = cmd, exited
	s.mu.Unlock()
	if s.starts == 1 {
		s.t.Logf("started %s (pid %d): %s %s", s.Kind, cmd.Process.Pid, s.bin, strings.Join(s.args(), " "))
	}
}

// Exited returns a channel closed when the running process has exited.
func (s *server) Exited() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exited
}

// waitReady polls a Range until it succeeds, the process exits, or readyTimeout.
// It first waits for the port to accept connections, so that gRPC's reconnect
// backoff does not inflate the measured start time.
func (s *server) waitReady() {
	s.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", hostPort(s.ClientURL), time.Second)
		if err == nil {
			conn.Close()
			break
		}
		lastErr = err
		select {
		case <-s.exited:
			s.dumpLog()
			s.t.Fatalf("%s exited before it listened on %s (last dial error: %v)", s.Kind, s.ClientURL, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	c := s.Client()
	defer c.Close()
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			s.dumpLog()
			s.t.Fatalf("%s exited before it was ready (last probe error: %v)", s.Kind, lastErr)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.Get(ctx, "qk-ready-probe")
		cancel()
		if err == nil {
			return
		}
		lastErr = err
		time.Sleep(20 * time.Millisecond)
	}
	s.dumpLog()
	s.t.Fatalf("%s not ready after %v: %v", s.Kind, readyTimeout, lastErr)
}

// Kill9 sends SIGKILL to the process (if any) and waits until it is gone.
func (s *server) Kill9() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	_ = s.proc.Process.Signal(syscall.SIGKILL)
	<-s.exited
	s.proc = nil
}

// Stop sends SIGTERM and waits up to grace for the process to exit. It
// returns how long the exit took and what Wait returned; after grace it kills
// the process and fails the test.
func (s *server) Stop(grace time.Duration) (time.Duration, error) {
	s.t.Helper()
	s.mu.Lock()
	proc, exited := s.proc, s.exited
	s.mu.Unlock()
	if proc == nil {
		return 0, nil
	}
	start := time.Now()
	_ = proc.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		s.Kill9()
		s.t.Fatalf("%s did not exit within %v of SIGTERM", s.Kind, grace)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc = nil
	return time.Since(start), s.exitErr
}

// PID is the running process's id, or 0.
func (s *server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.Process.Pid
}

// TLSConfig is a client configuration trusting the server, with the client pair.
func (s *server) TLSConfig() *tls.Config {
	s.t.Helper()
	return clientTLS(s.t, s.PKI.CAFile, &s.ClientPair)
}

// clientTLS trusts caFile and presents pair when pair is not nil.
func clientTLS(t testing.TB, caFile string, pair *keyPair) *tls.Config {
	t.Helper()
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatalf("read CA %s: %v", caFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("no certificate in %s", caFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if pair != nil {
		c, err := tls.LoadX509KeyPair(pair.Cert, pair.Key)
		if err != nil {
			t.Fatalf("load client pair %s: %v", pair.Cert, err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg
}

// Client is a fresh etcd client of the server; the caller closes it.
func (s *server) Client() *clientv3.Client {
	s.t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{s.ClientURL},
		TLS:         s.TLSConfig(),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		s.t.Fatalf("etcd client for %s: %v", s.ClientURL, err)
	}
	return c
}

// dumpLog prints the tail of the server's log (all its starts) to the test log.
func (s *server) dumpLog() {
	dumpFileTail(s.t, s.Kind+" log", s.logPath, 200)
}

// dumpFileTail logs the last n lines of path.
func dumpFileTail(t testing.TB, what, path string, n int) {
	f, err := os.Open(path)
	if err != nil {
		t.Logf("%s: %v", what, err)
		return
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	t.Logf("----- last %d lines of %s (%s) -----\n%s\n----- end of %s -----", len(lines), what, path, strings.Join(lines, "\n"), what)
}

// keepLog copies a log into $QK_E2E_LOGDIR (when set) as <test>-<file>, so
// that logs of passing runs can be compared (store vs etcd).
func keepLog(t testing.TB, path string) {
	dir := os.Getenv("QK_E2E_LOGDIR")
	if dir == "" {
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Logf("keep log %s: %v", path, err)
		return
	}
	name := strings.ReplaceAll(t.Name(), "/", "_") + "-" + filepath.Base(path)
	if err := os.MkdirAll(dir, 0o755); err == nil {
		err = os.WriteFile(filepath.Join(dir, name), data, 0o644)
	}
	if err != nil {
		t.Logf("keep log %s in %s: %v", path, dir, err)
	}
}

// freeAddr returns a loopback host:port nobody listens on right now, never
// handed out before in this process and outside the ephemeral port range
// (test/ports).
func freeAddr(t testing.TB) string {
	t.Helper()
	p, err := ports.Free(1)
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", p[0])
}

// hostPort strips the scheme of a URL like https://127.0.0.1:2479.
func hostPort(url string) string {
	if i := strings.Index(url, "://"); i >= 0 {
		return url[i+3:]
	}
	return url
}

// isExit reports whether err is a process exit with a non-zero status.
func isExit(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee)
}
