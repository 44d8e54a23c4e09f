package e2e

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// replaceWait is how long follow lets kube-controller-manager take to
// replace a killed operator pod before it nudges the operator's
// ReplicaSet. Replacement takes seconds; past this the ReplicaSet
// controller is stuck (below).
const replaceWait = 60 * time.Second

// Kubernetes v1.36's ReplicaSet controller checks that its pod informer
// has seen its own last write before it acts (KEP-5647, stale controller
// mitigation). Seen once in CI's shape, 6 December, a cold run with the
// host-only stages beside the cluster: the API server lost etcd for a few
// seconds (handler timeouts) as the operator pod was killed; the check
// failed ("read version: 512045 is not as new as written version: 512312
// for group resource pods"), the controller's retries stopped failing
// without creating the pod, and nothing woke it again: the operator's
// ReplicaSet stayed at 0 of 1 for ten minutes while every other
// ReplicaSet of the cluster worked. An update of the ReplicaSet
// (an annotation) made the controller create the pod at once. Not
// QuantyKube's code: the cluster was on etcd, no store in the path.

// operatorRunning reports whether an operator pod runs and is not being
// deleted (true while the API server is away: nothing to judge).
func (c *cluster) operatorRunning() bool {
	pods, err := c.runningOperatorPods()
	return err != nil || len(pods) > 0
}

// runningOperatorPods lists the operator pods that run and are not being
// deleted.
func (c *cluster) runningOperatorPods() ([]corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := c.CS.CoreV1().Pods("quantykube-system").List(ctx, metav1.ListOptions{LabelSelector: operatorSelector})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out, nil
}

// nudgeOperatorReplicaSet annotates the operator's ReplicaSets with the
// time, an update that makes the ReplicaSet controller sync them again.
func (c *cluster) nudgeOperatorReplicaSet() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rss, err := c.CS.AppsV1().ReplicaSets("quantykube-system").List(ctx, metav1.ListOptions{LabelSelector: operatorSelector})
	if err != nil {
		return fmt.Errorf("list the operator's ReplicaSets: %w", err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"quantykube.io/e2e-nudge":%q}}}`, time.Now().UTC().Format(time.RFC3339Nano))
	for _, rs := range rss.Items {
		if _, err := c.CS.AppsV1().ReplicaSets(rs.Namespace).Patch(ctx, rs.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("annotate ReplicaSet %s: %w", rs.Name, err)
		}
	}
	return nil
}
