package harness

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Reaction is how fast a cluster acts on a pod deletion on one node.
type Reaction struct {
	// Found: from the call to a Running pod of the Deployment found to
	// delete (one list when it runs already; after a node's move its pod
	// may still be starting).
	Found time.Duration
	// Gone: from the delete request to the pod gone from the API (the
	// node's kubelet saw the deletion, stopped the pod and confirmed it).
	Gone time.Duration
	// Replaced: from the delete request to its Deployment's new pod
	// Running on the same node (controller-manager, scheduler, kubelet).
	Replaced time.Duration
}

// reactionPoll is how often ReactsAtOnce looks: fine enough for seconds.
const reactionPoll = 100 * time.Millisecond

// ReactsAtOnce deletes the pod of the harness's hello-NODE Deployment (one
// replica pinned to node, grace period 1 s) and measures how long the
// cluster takes to remove it and to run its replacement there. It fails
// the test only after limit (a cluster that does not react at all); the
// figures are for the caller to log.
func ReactsAtOnce(t testing.TB, cs kubernetes.Interface, node string, limit time.Duration) Reaction {
	t.Helper()
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: "app=hello-" + node}
	var old *corev1.Pod
	called := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, reactionPoll, limit, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods("default").List(ctx, sel)
		if err != nil {
			return false, nil
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				old = p
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("no Running pod of Deployment hello-%s to delete: %v", node, err)
	}
	var r Reaction
	start := time.Now()
	r.Found = start.Sub(called)
	if err := cs.CoreV1().Pods("default").Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod %s: %v", old.Name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, reactionPoll, limit, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods("default").List(ctx, sel)
		if err != nil {
			return false, nil
		}
		gone := true
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.UID == old.UID {
				gone = false
			} else if r.Replaced == 0 && p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning {
				r.Replaced = time.Since(start)
			}
		}
		if gone && r.Gone == 0 {
			r.Gone = time.Since(start)
		}
		return r.Gone != 0 && r.Replaced != 0, nil
	})
	if err != nil {
		t.Fatalf("pod %s on %s: gone after %v, replaced after %v, within %v (0 = not yet): the cluster does not act on deletions", old.Name, node, r.Gone, r.Replaced, limit)
	}
	return r
}

// LeaderRestarts counts the container restarts of kube-controller-manager
// and kube-scheduler on control-plane node cp: each restart is a lost
// leader lease (they exit when they cannot renew it within 10 s).
func LeaderRestarts(t testing.TB, cs kubernetes.Interface, cp string) int32 {
	t.Helper()
	var n int32
	for _, name := range []string{"kube-controller-manager-" + cp, "kube-scheduler-" + cp} {
		var pod *corev1.Pod
		err := Retry(func() (err error) {
			pod, err = cs.CoreV1().Pods("kube-system").Get(context.Background(), name, metav1.GetOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		for _, st := range pod.Status.ContainerStatuses {
			n += st.RestartCount
		}
	}
	return n
}
