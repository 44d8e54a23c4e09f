package staticpod

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Kubelet is where a node's kubelet runs its static pods: the container
// runtime it talks to and the cgroup root under which it keeps a pod's
// cgroup until it has finished the pod.
type Kubelet struct {
	CRIEndpoint string // e.g. unix:///run/containerd/containerd.sock
	CgroupRoot  string // e.g. /sys/fs/cgroup
}

// KubeletAt reads the CRI endpoint from kubelet's configuration (or
// kubeadm's flags file) and pairs it with cgroupRoot; containerd's socket
// when neither names one.
func KubeletAt(kubeletConfig, kubeadmFlags, cgroupRoot string) Kubelet {
	k := Kubelet{CRIEndpoint: "unix:///run/containerd/containerd.sock", CgroupRoot: cgroupRoot}
	if b, err := os.ReadFile(kubeletConfig); err == nil {
		if m := regexp.MustCompile(`(?m)^containerRuntimeEndpoint:\s*"?([^"\s]+)`).FindSubmatch(b); m != nil {
			k.CRIEndpoint = string(m[1])
			return k
		}
	}
	if b, err := os.ReadFile(kubeadmFlags); err == nil {
		if m := regexp.MustCompile(`--container-runtime-endpoint=([^"\s]+)`).FindSubmatch(b); m != nil {
			k.CRIEndpoint = string(m[1])
		}
	}
	return k
}

// Stopped describes how a static pod whose manifest was removed is waited
// for. Component is both its container's name and the "component" label
// kubeadm gives its pod (etcd, kube-apiserver). Up reports whether the
// pod still serves (its port or health endpoint). Grace is how long it may
// take to exit on kubelet's SIGTERM before its containers are stopped
// through the CRI; Timeout bounds the whole wait.
type Stopped struct {
	Component string
	Up        func(ctx context.Context) bool
	Poll      time.Duration
	Grace     time.Duration
	Timeout   time.Duration
}

// forgetTimeout bounds the wait for kubelet to finish the old pod: past it
// kubelet starts the pod again after its back-off anyway, only later.
const forgetTimeout = 30 * time.Second

// WaitStopped waits until the static pod s names is gone after its manifest
// was removed, and forgotten by kubelet, so that a manifest put back later
// starts a new pod at once.
//
// Gone: s.Up is false and no container of s.Component runs. Forgotten:
// its stopped sandboxes are removed through the CRI (kubelet's own cleanup
// takes ~14 s) and kubelet has removed the pod's cgroup, the last thing it
// does for a finished pod (syncTerminatedPod). kubelet starts a static pod
// only once the pod worker of the one with the same name has finished; a
// manifest it sees before that — kubeadm's manifests keep their pod's UID
// when they come back unchanged — is put back for the pod workers' back-off
// (10 s, doubling to 5 min), which is how an etcd stopped and started in
// quick succession came back only minutes later. Finishing is best effort:
// past forgetTimeout WaitStopped returns nil and logs.
func (k Kubelet) WaitStopped(ctx context.Context, s Stopped) error {
	start := time.Now()
	var uids []string
	err := wait.PollUntilContextTimeout(ctx, s.Poll, s.Timeout, true, func(ctx context.Context) (bool, error) {
		up := s.Up(ctx)
		rt, ids, done, err := k.running(ctx, s.Component)
		if err != nil {
			return false, err
		}
		defer done()
		if !up && len(ids) == 0 {
			uids = removeSandboxes(ctx, rt, s.Component)
			return true, nil
		}
		if time.Since(start) > s.Grace {
			for _, id := range ids {
				if _, err := rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
					slog.Debug("stop a static pod's container through the CRI", "component", s.Component, "id", id, "err", err)
				}
			}
		}
		return false, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("%s is still running %v after its manifest was removed", s.Component, s.Timeout)
	}
	if err != nil {
		return err
	}
	k.waitForgotten(ctx, s.Component, s.Poll, uids)
	return nil
}

// running lists the running containers named component in kube-system.
func (k Kubelet) running(ctx context.Context, component string) (runtimeapi.RuntimeServiceClient, []string, func(), error) {
	target := k.CRIEndpoint
	if !strings.HasPrefix(target, "unix://") {
		target = "unix://" + target
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connect to the container runtime at %s: %w", k.CRIEndpoint, err)
	}
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := rt.ListContainers(cctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{"io.kubernetes.container.name": component, "io.kubernetes.pod.namespace": "kube-system"},
	}})
	if err != nil {
		conn.Close()
		return nil, nil, nil, fmt.Errorf("list containers at %s: %w", k.CRIEndpoint, err)
	}
	var ids []string
	for _, c := range resp.Containers {
		ids = append(ids, c.Id)
	}
	return rt, ids, func() { conn.Close() }, nil
}

// removeSandboxes stops and removes the pod sandboxes of component (their
// containers have exited), as kubelet's own cleanup would, and returns the
// UIDs of their pods. Best effort: kubelet does it itself, only slower.
func removeSandboxes(ctx context.Context, rt runtimeapi.RuntimeServiceClient, component string) []string {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := rt.ListPodSandbox(cctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"component": component, "io.kubernetes.pod.namespace": "kube-system"},
	}})
	if err != nil {
		slog.Debug("list a static pod's old sandboxes", "component", component, "err", err)
		return nil
	}
	var uids []string
	for _, sb := range resp.Items {
		if sb.Metadata != nil && sb.Metadata.Uid != "" {
			uids = append(uids, sb.Metadata.Uid)
		}
		if _, err := rt.StopPodSandbox(cctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			slog.Debug("stop a static pod's old sandbox", "component", component, "id", sb.Id, "err", err)
		}
		if _, err := rt.RemovePodSandbox(cctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			slog.Debug("remove a static pod's old sandbox", "component", component, "id", sb.Id, "err", err)
		}
	}
	return uids
}

// waitForgotten waits until kubelet removed the cgroups of pods uids
// (measured here: a manifest written 0.4 s after the old sandbox was
// removed started its pod 10.7 s later; written after the cgroup was gone,
// at once).
func (k Kubelet) waitForgotten(ctx context.Context, component string, poll time.Duration, uids []string) {
	if len(uids) == 0 {
		return
	}
	err := wait.PollUntilContextTimeout(ctx, poll, forgetTimeout, true, func(context.Context) (bool, error) {
		for _, uid := range uids {
			if PodCgroupExists(k.CgroupRoot, uid) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		slog.Info("kubelet still holds the old pod; it will start the new one after its back-off", "component", component, "pods", uids, "err", err)
	}
}

// PodCgroupExists reports whether kubelet's cgroup of pod uid exists under
// root (/sys/fs/cgroup): cgroup v1 or v2, cgroupfs or systemd driver,
// any QoS class (kubepods/burstable/pod<uid>,
// kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice).
func PodCgroupExists(root, uid string) bool {
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
