package runtimemove

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// lateRuntime is a CRI runtime whose container "late" is created when first
// listed and starts right after StopContainer found it not running (a start
// the kubelet sent before it stopped), as containerd 1.6 did in CI; a
// running container cannot be removed. Only the calls removeAll makes exist.
type lateRuntime struct {
	runtimeapi.RuntimeServiceClient
	mu         sync.Mutex
	containers map[string]string // id → state
	sandboxes  map[string]bool
	stops      int
}

func (r *lateRuntime) ListContainers(context.Context, *runtimeapi.ListContainersRequest, ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var cs []*runtimeapi.Container
	for id := range r.containers {
		cs = append(cs, &runtimeapi.Container{Id: id})
	}
	return &runtimeapi.ListContainersResponse{Containers: cs}, nil
}

func (r *lateRuntime) StopContainer(_ context.Context, req *runtimeapi.StopContainerRequest, _ ...grpc.CallOption) (*runtimeapi.StopContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.containers[req.ContainerId] {
	case "running":
		r.containers[req.ContainerId] = "exited"
	case "created":
		r.containers[req.ContainerId] = "running" // the kubelet's start lands now
	}
	r.stops++
	return &runtimeapi.StopContainerResponse{}, nil
}

func (r *lateRuntime) RemoveContainer(_ context.Context, req *runtimeapi.RemoveContainerRequest, _ ...grpc.CallOption) (*runtimeapi.RemoveContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.containers[req.ContainerId] == "running" {
		return nil, errors.New("failed to set removing state for container: container is still running, to stop first")
	}
	delete(r.containers, req.ContainerId)
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (r *lateRuntime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ps []*runtimeapi.PodSandbox
	for id := range r.sandboxes {
		ps = append(ps, &runtimeapi.PodSandbox{Id: id, Metadata: &runtimeapi.PodSandboxMetadata{Name: id, Namespace: "kube-system"}})
	}
	return &runtimeapi.ListPodSandboxResponse{Items: ps}, nil
}

func (r *lateRuntime) StopPodSandbox(context.Context, *runtimeapi.StopPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.StopPodSandboxResponse, error) {
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (r *lateRuntime) RemovePodSandbox(_ context.Context, req *runtimeapi.RemovePodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.RemovePodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sandboxes, req.PodSandboxId)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// TestRemoveAllStopsAContainerThatStartedLate: a container that was only
// created when it was stopped, and running when it was removed, is stopped
// and removed in the next round; the pods go too.
func TestRemoveAllStopsAContainerThatStartedLate(t *testing.T) {
	defer func(p time.Duration) { removeRetryPause = p }(removeRetryPause)
	removeRetryPause = 0
	rt := &lateRuntime{containers: map[string]string{"late": "created", "old": "running"}, sandboxes: map[string]bool{"p1": true, "p2": true}}
	n, err := removeAll(context.Background(), rt, "unix:///fake.sock")
	if err != nil || n != 2 {
		t.Fatalf("removeAll = %d, %v; want 2 pods removed", n, err)
	}
	if len(rt.containers) != 0 || len(rt.sandboxes) != 0 {
		t.Fatalf("left behind: containers %v, pods %v", rt.containers, rt.sandboxes)
	}
}

// TestRemoveAllGivesUpWithTheRuntimesError: a container that never stops
// fails the step after removeRounds rounds, with the runtime's words.
func TestRemoveAllGivesUpWithTheRuntimesError(t *testing.T) {
	defer func(p time.Duration) { removeRetryPause = p }(removeRetryPause)
	removeRetryPause = 0
	rt := &stuckRuntime{lateRuntime{containers: map[string]string{"stuck": "running"}, sandboxes: map[string]bool{}}}
	_, err := removeAll(context.Background(), rt, "unix:///fake.sock")
	if err == nil || !strings.Contains(err.Error(), "still running") || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Fatalf("removeAll = %v; want the runtime's error after 3 attempts", err)
	}
	if rt.stops != removeRounds {
		t.Fatalf("stopped %d times, want %d", rt.stops, removeRounds)
	}
}

// stuckRuntime never stops its containers.
type stuckRuntime struct{ lateRuntime }

func (r *stuckRuntime) StopContainer(context.Context, *runtimeapi.StopContainerRequest, ...grpc.CallOption) (*runtimeapi.StopContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stops++
	return &runtimeapi.StopContainerResponse{}, nil
}
