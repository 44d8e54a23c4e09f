// Package kube runs the Kubernetes-shaped workload: a real kube-apiserver on
// the store under test, and ConfigMaps created, updated, listed and deleted
// through client-go by concurrent clients.
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/quantyroot/quantykube/bench/internal/server"
)

// APIServer is a running kube-apiserver.
type APIServer struct {
	Config *rest.Config
	cmd    *exec.Cmd
	done   chan error
	log    *os.File
}

// StartAPIServer starts bin on a free loopback port with its state under dir,
// storing into the etcd API at storeEndpoint (plain http), and waits for
// /readyz on a port it owns (retrying on new ports when another process took
// the chosen one first).
func StartAPIServer(ctx context.Context, bin, storeEndpoint, dir string) (*APIServer, error) {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		var a *APIServer
		a, err = startAPIServer(ctx, bin, storeEndpoint, dir)
		if err == nil {
			return a, nil
		}
		if !errors.Is(err, errPortTaken) {
			return nil, err
		}
		slog.Warn("apiserver port taken by another process; retrying", "attempt", attempt)
	}
	return nil, err
}

var errPortTaken = errors.New("port taken by another process")

func startAPIServer(ctx context.Context, bin, storeEndpoint, dir string) (*APIServer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	p, err := writePKI(dir)
	if err != nil {
		return nil, err
	}
	port, err := server.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--etcd-servers", "http://" + storeEndpoint,
		"--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(port),
		"--tls-cert-file", p.CertFile, "--tls-private-key-file", p.KeyFile,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", p.SAPubFile, "--service-account-signing-key-file", p.SAKeyFile,
		"--service-cluster-ip-range", "10.96.0.0/12",
		"--token-auth-file", p.TokenFile, "--authorization-mode", "AlwaysAllow",
		// The kubernetes Service's endpoints cannot be loopback; nothing here needs them.
		"--endpoint-reconciler-type", "none",
		"--shutdown-watch-termination-grace-period", "1s", "--shutdown-delay-duration", "0s",
		"--v", "1",
	}
	logf, err := os.Create(filepath.Join(dir, "kube-apiserver.log"))
	if err != nil {
		return nil, fmt.Errorf("create apiserver log: %w", err)
	}
	a := &APIServer{log: logf, done: make(chan error, 1)}
	a.cmd = exec.Command(bin, args...)
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := a.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { a.done <- a.cmd.Wait() }()
	a.Config = &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", port),
		BearerToken:     p.Token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: p.CertFile},
		QPS:             -1, // no client-side rate limit: the server is what is measured
		Timeout:         60 * time.Second,
	}
	if err := a.waitReady(ctx, 120*time.Second); err != nil {
		a.Stop()
		if b, _ := os.ReadFile(logf.Name()); strings.Contains(string(b), "address already in use") {
			return nil, fmt.Errorf("kube-apiserver on %s: %w", a.Config.Host, errPortTaken)
		}
		return nil, fmt.Errorf("kube-apiserver on %s did not become ready (log %s): %w", a.Config.Host, logf.Name(), err)
	}
	if own, err := server.Listens(a.Pid(), port); err != nil || !own {
		a.Stop()
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("kube-apiserver on %s: %w", a.Config.Host, errPortTaken)
	}
	slog.Info("kube-apiserver ready", "host", a.Config.Host, "store", storeEndpoint)
	return a, nil
}

func (a *APIServer) waitReady(ctx context.Context, limit time.Duration) error {
	cs, err := kubernetes.NewForConfig(a.Config)
	if err != nil {
		return fmt.Errorf("client of apiserver: %w", err)
	}
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		select {
		case err := <-a.done:
			a.done <- err
			return fmt.Errorf("exited early: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(cctx)
		cancel()
		if err == nil && string(body) == "ok" {
			return nil
		}
		last = err
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("no ready /readyz after %s: %v", limit, last)
}

// Pid is the apiserver's process id.
func (a *APIServer) Pid() int { return a.cmd.Process.Pid }

// Stop terminates the apiserver and waits for it.
func (a *APIServer) Stop() {
	defer a.log.Close()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
		return
	case <-time.After(10 * time.Second):
	}
	_ = a.cmd.Process.Kill()
	<-a.done
}
