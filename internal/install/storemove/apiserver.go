package storemove

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

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

// criEndpoint is the kubelet's container runtime endpoint.
func (p Paths) criEndpoint() string {
	if b, err := os.ReadFile(p.KubeletCfg); err == nil {
		if m := regexp.MustCompile(`(?m)^containerRuntimeEndpoint:\s*"?([^"\s]+)`).FindSubmatch(b); m != nil {
			return string(m[1])
		}
	}
	if b, err := os.ReadFile("/var/lib/kubelet/kubeadm-flags.env"); err == nil {
		if m := regexp.MustCompile(`--container-runtime-endpoint=([^"\s]+)`).FindSubmatch(b); m != nil {
			return string(m[1])
		}
	}
	return "unix:///run/containerd/containerd.sock"
}

// runningAPIServers lists the running kube-apiserver containers through the CRI.
func runningAPIServers(ctx context.Context, endpoint string) (runtimeapi.RuntimeServiceClient, []string, func(), error) {
	target := endpoint
	if !strings.HasPrefix(target, "unix://") {
		target = "unix://" + target
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connect to the container runtime at %s: %w", endpoint, err)
	}
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := rt.ListContainers(cctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{"io.kubernetes.container.name": "kube-apiserver", "io.kubernetes.pod.namespace": "kube-system"},
	}})
	if err != nil {
		conn.Close()
		return nil, nil, nil, fmt.Errorf("list containers at %s: %w", endpoint, err)
	}
	var ids []string
	for _, c := range resp.Containers {
		ids = append(ids, c.Id)
	}
	return rt, ids, func() { conn.Close() }, nil
}

// removeAPIServerSandboxes stops and removes the kube-apiserver pod
// sandboxes (their containers have exited), as kubelet's own cleanup would,
// and returns the UIDs of their pods.
func removeAPIServerSandboxes(ctx context.Context, rt runtimeapi.RuntimeServiceClient) []string {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := rt.ListPodSandbox(cctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"component": "kube-apiserver", "io.kubernetes.pod.namespace": "kube-system"},
	}})
	if err != nil {
		slog.Debug("list the old API server sandboxes", "err", err)
		return nil
	}
	var uids []string
	for _, sb := range resp.Items {
		if sb.Metadata != nil && sb.Metadata.Uid != "" {
			uids = append(uids, sb.Metadata.Uid)
		}
		// Best effort: kubelet cleans the sandbox up itself, only slower.
		if _, err := rt.StopPodSandbox(cctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			slog.Debug("stop the old API server sandbox", "id", sb.Id, "err", err)
		}
		if _, err := rt.RemovePodSandbox(cctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			slog.Debug("remove the old API server sandbox", "id", sb.Id, "err", err)
		}
	}
	return uids
}

// StopAPIServer removes the API server manifest from kubelet's directory
// (the original is kept at saveTo first) and waits until the API server is
// gone: /readyz fails and no kube-apiserver container runs. kube-apiserver
// can linger for its whole grace period on SIGTERM with watches open, so
// after a short wait its container is stopped through the CRI.
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
	start := time.Now()
	endpoint := p.criEndpoint()
	var oldPods []string
	err = wait.PollUntilContextTimeout(ctx, apiserverPoll, apiserverStopTimeout, true, func(ctx context.Context) (bool, error) {
		ready := APIServerReady(ctx, port)
		rt, ids, done, err := runningAPIServers(ctx, endpoint)
		if err != nil {
			return false, err
		}
		defer done()
		if !ready && len(ids) == 0 {
			// kubelet starts a changed static pod of the same name only once
			// the old pod is cleaned up, which it takes ~14 s to do by
			// itself; removing the stopped sandbox now cuts that to ~1 s.
			oldPods = removeAPIServerSandboxes(ctx, rt)
			return true, nil
		}
		if time.Since(start) > apiserverStopGrace {
			for _, id := range ids {
				if _, err := rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
					slog.Debug("stop the API server container through the CRI", "id", id, "err", err)
				}
			}
		}
		return false, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("the API server is still running %v after its manifest was removed", apiserverStopTimeout)
	}
	if err != nil {
		return err
	}
	p.waitPodsForgotten(ctx, oldPods)
	return nil
}

// podForgetTimeout bounds waitPodsForgotten: past it kubelet starts the new
// pod after its back-off anyway, only later.
const podForgetTimeout = 30 * time.Second

// waitPodsForgotten waits until kubelet is done with the old API server
// pods. kubelet starts a static pod only once the pod worker of the one it
// replaces (same name) has finished; one it sees before that is put back
// for the pod workers' back-off (10–15 s): measured here, a manifest
// written 0.4 s after the old sandbox was removed started its pod 10.7 s
// later. The last thing kubelet does for a finished pod is remove its pod
// cgroup (kubelet's syncTerminatedPod), so that is what is waited for.
// Best effort: on timeout the move goes on.
func (p Paths) waitPodsForgotten(ctx context.Context, uids []string) {
	if len(uids) == 0 {
		return
	}
	err := wait.PollUntilContextTimeout(ctx, apiserverPoll, podForgetTimeout, true, func(context.Context) (bool, error) {
		for _, uid := range uids {
			if podCgroupExists(p.CgroupRoot, uid) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		slog.Info("kubelet still holds the old API server pod; it will start the new one after its back-off", "pods", uids, "err", err)
	}
}

// podCgroupExists reports whether kubelet's cgroup of pod uid exists under
// root (/sys/fs/cgroup): cgroup v1 or v2, cgroupfs or systemd driver,
// any QoS class (kubepods/burstable/pod<uid>,
// kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice).
func podCgroupExists(root, uid string) bool {
	for _, id := range []string{uid, strings.ReplaceAll(uid, "-", "_")} {
		for _, controller := range []string{"", "/*"} {
			for _, qos := range []string{"", "/*"} {
				if m, _ := filepath.Glob(root + controller + "/kubepods*" + qos + "/*pod" + id + "*"); len(m) > 0 {
					return true
				}
			}
		}
	}
	return false
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
