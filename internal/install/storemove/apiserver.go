package storemove

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quantyroot/quantykube/internal/install/staticpod"
)

func quietZap() *zap.Logger { return zap.NewNop() }

// APIServerPort is the API server's --secure-port (6443 by default).
func APIServerPort(manifest []byte) string {
	if v, ok := staticpod.Flag(manifest, "secure-port"); ok {
		return v
	}
	return "6443"
}

var insecureHTTP = &http.Client{
	Timeout:   2 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // a local liveness probe
}

// APIServerReady reports whether the local API server answers /readyz.
func APIServerReady(ctx context.Context, port string) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+port+"/readyz", nil)
	resp, err := insecureHTTP.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Waits for the API server. apiserverPoll is fine enough to measure its
// downtime; apiserverStopGrace is how long it may linger on SIGTERM before
// its container is stopped through the CRI; apiserverStopTimeout bounds the
// whole stop.
const (
	apiserverPoll        = 100 * time.Millisecond
	apiserverStopGrace   = 3 * time.Second
	apiserverStopTimeout = 90 * time.Second
)

// WaitReady waits until the API server answers /readyz.
func WaitReady(ctx context.Context, port string, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, apiserverPoll, timeout, true, func(ctx context.Context) (bool, error) {
		return APIServerReady(ctx, port), nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("the API server did not become ready on :%s within %v", port, timeout)
	}
	return err
}

// Kubelet is this node's kubelet, for stopping its static pods.
func (p Paths) Kubelet() staticpod.Kubelet {
	return staticpod.KubeletAt(p.KubeletCfg, "/var/lib/kubelet/kubeadm-flags.env", p.CgroupRoot)
}

// StopAPIServer removes the API server manifest from kubelet's directory
// (the original is kept at saveTo first) and waits until the API server is
// gone and forgotten by kubelet (staticpod.Kubelet.WaitStopped): /readyz
// fails and no kube-apiserver container runs. kube-apiserver can linger for
// its whole grace period on SIGTERM with watches open, so after
// apiserverStopGrace its container is stopped through the CRI.
func (p Paths) StopAPIServer(ctx context.Context, saveTo string, port string) error {
	cur, err := os.ReadFile(p.APIServerManifest())
	switch {
	case err == nil:
		if err := staticpod.WriteAtomic(saveTo, cur, 0o600); err != nil {
			return err
		}
		if err := os.Remove(p.APIServerManifest()); err != nil {
			return fmt.Errorf("move the API server manifest out: %w", err)
		}
	case errors.Is(err, os.ErrNotExist):
		if _, err := os.Stat(saveTo); err != nil {
			return fmt.Errorf("the API server manifest is neither in %s nor saved at %s", p.Manifests, saveTo)
		}
	default:
		return err
	}
	return p.Kubelet().WaitStopped(ctx, staticpod.Stopped{
		Component: "kube-apiserver",
		Up:        func(ctx context.Context) bool { return APIServerReady(ctx, port) },
		Poll:      apiserverPoll,
		Grace:     apiserverStopGrace,
		Timeout:   apiserverStopTimeout,
	})
}

// StartAPIServer puts manifest into kubelet's directory atomically and waits
// until the API server is ready.
func (p Paths) StartAPIServer(ctx context.Context, manifest []byte, timeout time.Duration) error {
	if !staticpod.Equal(p.APIServerManifest(), manifest) {
		if err := staticpod.WriteAtomic(p.APIServerManifest(), manifest, 0o600); err != nil {
			return err
		}
	}
	return WaitReady(ctx, APIServerPort(manifest), timeout)
}
