package runtimemove

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criClient is a CRI v1 connection to one runtime's socket.
type criClient struct {
	endpoint string
	conn     *grpc.ClientConn
	rt       runtimeapi.RuntimeServiceClient
	im       runtimeapi.ImageServiceClient
}

func dialCRI(endpoint string) (*criClient, error) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial CRI %s: %w", endpoint, err)
	}
	return &criClient{endpoint: endpoint, conn: conn, rt: runtimeapi.NewRuntimeServiceClient(conn), im: runtimeapi.NewImageServiceClient(conn)}, nil
}

func (c *criClient) Close() { c.conn.Close() }

// version asks the runtime its name, within 5 s.
func (c *criClient) version(ctx context.Context) (string, error) {
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := c.rt.Version(vctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return "", fmt.Errorf("CRI runtime at %s does not answer: %w", c.endpoint, err)
	}
	return v.RuntimeName, nil
}

// runtimeName dials endpoint and returns the runtime's name.
func runtimeName(ctx context.Context, endpoint string) (string, error) {
	c, err := dialCRI(endpoint)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.version(ctx)
}

// stopTimeout is each container's grace period, in seconds: the node is
// drained, so only static and DaemonSet pods are stopped, and they restart.
const stopTimeout = 10

// gracePeriod is the pod's terminationGracePeriodSeconds as the kubelet
// recorded it on the container, at most stopTimeout.
func gracePeriod(ct *runtimeapi.Container) int64 {
	v, err := strconv.ParseInt(ct.Annotations["io.kubernetes.pod.terminationGracePeriod"], 10, 64)
	if err != nil || v < 0 || v > stopTimeout {
		return stopTimeout
	}
	return v
}

// removeAllPods stops and removes every container and pod sandbox of the
// runtime at endpoint (they hold host ports and node resources). Nothing
// else of that runtime is touched: its images and root dir stay.
func removeAllPods(ctx context.Context, endpoint string) (int, error) {
	c, err := dialCRI(endpoint)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if _, err := c.version(ctx); err != nil {
		return 0, err
	}
	return removeAll(ctx, c.rt, endpoint)
}

// removeRounds is how many times removeAll lists the containers and stops
// and removes them before it gives up. A container the kubelet was starting
// as it stopped can be listed as created — StopContainer then has nothing
// to stop — and be running a moment later, when the runtime refuses to
// remove it ("container is still running, to stop first": containerd
// 1.6.20 in CI, 6 December); the next round stops it again.
const removeRounds = 3

// removeRetryPause is the wait between two rounds (a variable for tests).
var removeRetryPause = time.Second

// removeAll is removeAllPods on a connected runtime: the containers (in
// rounds, see removeRounds), then the pod sandboxes. It returns the number
// of sandboxes removed.
func removeAll(ctx context.Context, rt runtimeapi.RuntimeServiceClient, endpoint string) (int, error) {
	for round := 1; ; round++ {
		err := removeContainers(ctx, rt, endpoint)
		if err == nil {
			break
		}
		if round == removeRounds {
			return 0, fmt.Errorf("%w (after %d attempts)", err, removeRounds)
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(removeRetryPause):
		}
	}
	ps, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return 0, fmt.Errorf("list pods of %s: %w", endpoint, err)
	}
	for _, p := range ps.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			return 0, fmt.Errorf("stop pod %s/%s on %s: %w", p.Metadata.GetNamespace(), p.Metadata.GetName(), endpoint, err)
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			return 0, fmt.Errorf("remove pod %s/%s on %s: %w", p.Metadata.GetNamespace(), p.Metadata.GetName(), endpoint, err)
		}
	}
	return len(ps.Items), nil
}

// removeContainers stops and removes every container the runtime lists,
// in parallel (each may take its whole grace period), and returns the
// first error.
func removeContainers(ctx context.Context, rt runtimeapi.RuntimeServiceClient, endpoint string) error {
	cs, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return fmt.Errorf("list containers of %s: %w", endpoint, err)
	}
	errs := make(chan error, len(cs.Containers))
	for _, ct := range cs.Containers {
		go func() {
			if _, err := rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ct.Id, Timeout: gracePeriod(ct)}); err != nil {
				errs <- fmt.Errorf("stop container %s on %s: %w", ct.Id, endpoint, err)
				return
			}
			if _, err := rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: ct.Id}); err != nil {
				errs <- fmt.Errorf("remove container %s on %s: %w", ct.Id, endpoint, err)
				return
			}
			errs <- nil
		}()
	}
	var first error
	for range cs.Containers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// hasImage reports whether the runtime at c holds ref.
func (c *criClient) hasImage(ctx context.Context, ref string) (bool, error) {
	r, err := c.im.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		return false, fmt.Errorf("image status of %s: %w", ref, err)
	}
	return r.Image != nil, nil
}
