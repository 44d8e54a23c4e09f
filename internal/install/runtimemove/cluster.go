package runtimemove

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// criSocketAnnotation is kubeadm's record of a node's runtime endpoint.
const criSocketAnnotation = "kubeadm.alpha.kubernetes.io/cri-socket"

// mirrorAnnotation marks the API's copy of a static pod.
const mirrorAnnotation = "kubernetes.io/config.mirror"

// apiClient talks to the API server as the node itself (kubelet.conf).
func (p Paths) apiClient() (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", p.KubeletConf)
	if err != nil {
		return nil, fmt.Errorf("kubelet kubeconfig %s: %w; pass --kubelet-kubeconfig", p.KubeletConf, unwrap(err))
	}
	cfg.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(cfg)
}

// nodePods are the pods bound to a node, by kind.
type nodePods struct {
	Static, DaemonSet, Other []corev1.Pod
}

func isDaemonSetPod(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// listNodePods sorts the node's live pods into static, DaemonSet and other.
func listNodePods(ctx context.Context, cs *kubernetes.Clientset, node string) (*nodePods, error) {
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("list the pods of node %s: %w", node, err)
	}
	out := &nodePods{}
	for _, pod := range list.Items {
		switch {
		case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		case pod.Annotations[mirrorAnnotation] != "":
			out.Static = append(out.Static, pod)
		case isDaemonSetPod(&pod):
			out.DaemonSet = append(out.DaemonSet, pod)
		default:
			out.Other = append(out.Other, pod)
		}
	}
	return out, nil
}

// notDrained is the refusal of a node where pods other than static and
// DaemonSet pods run — what `install runtime --dry-run` prints before a
// drain: the pods a drain evicts, and those of them whose emptyDir data it
// deletes (kubectl drain refuses those without --delete-emptydir-data).
// The emptyDir test is kubectl's (k8s.io/kubectl/pkg/drain's
// localStorageFilter: an emptyDir volume; finished pods are not in others),
// written out here because kubectl's filters also read each DaemonSet, which
// the node's own credentials (kubelet.conf) may not.
func notDrained(node string, others []corev1.Pod) error {
	var withData []corev1.Pod
	for _, p := range others {
		if slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.EmptyDir != nil }) {
			withData = append(withData, p)
		}
	}
	names := podNames(others)
	if len(names) > 5 {
		names = append(names[:5], fmt.Sprintf("and %d more", len(names)-5))
	}
	drain := "kubectl drain " + node + " --ignore-daemonsets"
	data := ""
	if len(withData) > 0 {
		data = fmt.Sprintf(" (the drain deletes the emptyDir data of %s)", strings.Join(podNames(withData), ", "))
		drain += " --delete-emptydir-data"
	}
	return fmt.Errorf("node %s is not drained: %s still run there%s; run `%s` first", node, strings.Join(names, ", "), data, drain)
}

func podNames(ps []corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	sort.Strings(out)
	return out
}

// images lists every image the static and DaemonSet pods use.
func (n *nodePods) images() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range append(append([]corev1.Pod{}, n.Static...), n.DaemonSet...) {
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			if !seen[c.Image] {
				seen[c.Image] = true
				out = append(out, c.Image)
			}
		}
	}
	sort.Strings(out)
	return out
}

// setCRISocketAnnotation sets (or, with value "", removes) kubeadm's
// cri-socket annotation on the node.
func setCRISocketAnnotation(ctx context.Context, cs *kubernetes.Clientset, node, value string) error {
	var v any = value
	if value == "" {
		v = nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{criSocketAnnotation: v}}})
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("annotate node %s with %s: %w", node, criSocketAnnotation, err)
	}
	return nil
}

// readyOn reports whether the node is Ready, heartbeating since since, on a
// runtime named runtime, with every static pod running there; else why not.
func readyOn(ctx context.Context, cs *kubernetes.Clientset, node, runtime string, since time.Time) (bool, string) {
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	if !strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, runtime+"://") {
		return false, "the node reports runtime " + n.Status.NodeInfo.ContainerRuntimeVersion
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.Time.Before(since.Add(-time.Second)) {
			ready = true
		}
	}
	if !ready {
		return false, "the node is not Ready since the kubelet started"
	}
	pods, err := listNodePods(ctx, cs, node)
	if err != nil {
		return false, err.Error()
	}
	for _, p := range pods.Static {
		if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
			return false, "static pod " + p.Name + " is " + string(p.Status.Phase)
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Running == nil || !strings.HasPrefix(c.ContainerID, runtime+"://") {
				return false, "static pod " + p.Name + " container " + c.Name + " does not run on " + runtime + " yet"
			}
			if !c.Ready {
				return false, "static pod " + p.Name + " container " + c.Name + " is not ready yet"
			}
		}
	}
	return true, ""
}

// waitReadyOn waits up to timeout for readyOn.
func waitReadyOn(ctx context.Context, cs *kubernetes.Clientset, node, runtime string, since time.Time, timeout time.Duration) error {
	why := ""
	err := wait.PollUntilContextTimeout(ctx, apiRetry, timeout, true, func(ctx context.Context) (bool, error) {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var ok bool
		ok, why = readyOn(qctx, cs, node, runtime, since)
		return ok, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("node %s not Ready on %s with its static pods within %v: %s (see journalctl -u kubelet)", node, runtime, timeout, why)
	}
	return err
}
