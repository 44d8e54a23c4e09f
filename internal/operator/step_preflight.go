package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/internal/operator/hostrun"
)

// preflightStep checks a node before anything touches it: if the operator
// itself runs there, another node must be able to take it when the drain
// evicts it; and the node's install checks must pass on the host (a host pod
// runs `install runtime --preflight`, the checks that need no drain). A
// refusal fails the node with the host's reason, neither cordoned nor
// drained.
func (r *Reconciler) preflightStep(ctx context.Context, in *v1.Installation, name string) (outcome, error) {
	stuck, err := r.nowhereToGo(ctx, name)
	if err != nil {
		return outcome{}, err
	}
	if stuck != "" {
		return outcome{failed: errors.New(stuck)}, nil
	}
	j := hostJob{Target: hostrun.Target{Subject: v1.SubjectRuntime, Op: v1.OperationInstall}, Node: name, Preflight: true, Since: nodeStart(in, name)}
	return r.followHostJob(ctx, in, j)
}

// nowhereToGo returns why draining node would leave the operator nowhere to
// run ("" when it does not run there, or another node can take it): some
// other node must be Ready, schedulable, match its node selector and carry
// no taint its pod does not tolerate.
func (r *Reconciler) nowhereToGo(ctx context.Context, node string) (string, error) {
	if r.PodName == "" {
		return "", nil // not running in a pod (tests, out of cluster)
	}
	var self corev1.Pod
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: r.PodNamespace, Name: r.PodName}, &self); err != nil {
		return "", fmt.Errorf("get the operator's own pod %s/%s: %w", r.PodNamespace, r.PodName, err)
	}
	if self.Spec.NodeName != node {
		return "", nil
	}
	// Live, not the cache: the test that found it cordoned the only other
	// node right before the retry, and the node informer, still in its
	// back-off from the API server's restart in the store's move, had not
	// seen it — the drain then evicted the operator with nowhere to go.
	var nodes corev1.NodeList
	if err := r.APIReader.List(ctx, &nodes); err != nil {
		return "", fmt.Errorf("list nodes: %w", err)
	}
	var why []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Name == node {
			continue
		}
		reason := whyNotRun(&self, n)
		if reason == "" {
			return "", nil // the drain evicts the operator; it goes on from there
		}
		why = append(why, n.Name+": "+reason)
	}
	return fmt.Sprintf("the operator runs on %s, the node to drain, and no other node can take it (%s); make room on another node (its Deployment tolerates the control plane's taint), then change the spec to retry", node, otherNodes(why)), nil
}

// otherNodes lists why each other node cannot take the operator, for the
// refusal: the state of the moment, which the refusal is the only record of.
func otherNodes(why []string) string {
	if len(why) == 0 {
		return "there is no other node"
	}
	return strings.Join(why, "; ")
}

// whyNotRun says why the scheduler could not place pod on n ("" if it
// could): cordoned, not Ready, outside the node selector, or a taint the
// pod does not tolerate.
func whyNotRun(pod *corev1.Pod, n *corev1.Node) string {
	switch {
	case n.Spec.Unschedulable:
		return "cordoned"
	case !nodeReady(n):
		return notReady(n)
	case !labels.SelectorFromSet(pod.Spec.NodeSelector).Matches(labels.Set(n.Labels)):
		return "outside its node selector"
	}
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		tolerated := false
		for j := range pod.Spec.Tolerations {
			if pod.Spec.Tolerations[j].ToleratesTaint(logr.Discard(), t, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return "taint " + t.ToString() + " not tolerated"
		}
	}
	return ""
}

// notReady describes a node that is not Ready: its Ready condition's
// status, since when and why, as the node controller or the kubelet set it.
func notReady(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return fmt.Sprintf("Ready %s since %s (%s)", c.Status, c.LastTransitionTime.UTC().Format(time.RFC3339), c.Reason)
		}
	}
	return "no Ready condition"
}
