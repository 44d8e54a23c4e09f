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
// runs `install runtime --preflight`, the checks that need no drain), and
// the drain the spec allows (drain_plan.go): what the drain will do is in
// the step's Event. A refusal fails the node with its reason, neither
// cordoned nor drained. When the only nodes that could take the operator are not Ready,
// the step waits up to RoomWait for one of them first: right after the
// store's move a node can be Ready Unknown for a minute (its kubelet's lease
// lapsed while the API server restarted) and comes back by itself.
func (r *Reconciler) preflightStep(ctx context.Context, in *v1.Installation, name string) (outcome, error) {
	room, err := r.roomForOperator(ctx, name)
	if err != nil {
		return outcome{}, err
	}
	if room.refusal != "" {
		waited := r.stepAge(in)
		if room.mayComeBack && waited < r.RoomWait {
			return outcome{progress: fmt.Sprintf("preflight: waiting up to %v for another node to take the operator (%s)", r.RoomWait, room.others)}, nil
		}
		if room.mayComeBack {
			return outcome{failed: fmt.Errorf("%s (waited %v for one to turn Ready)", room.refusal, waited.Round(time.Second))}, nil
		}
		return outcome{failed: errors.New(room.refusal)}, nil
	}
	plan, err := r.planDrain(ctx, in, name)
	if err != nil {
		return outcome{}, err
	}
	if plan.refusal != nil {
		return outcome{failed: plan.refusal}, nil
	}
	j := hostJob{Target: hostrun.Target{Subject: v1.SubjectRuntime, Op: v1.OperationInstall}, Node: name, Preflight: true, Since: nodeStart(in, name)}
	out, err := r.followHostJob(ctx, in, j)
	if out.done {
		out.detail = joinDetail(out.detail, plan.impact())
	}
	return out, err
}

// stepAge is how long the recorded step has run (0 if its start is not
// recorded).
func (r *Reconciler) stepAge(in *v1.Installation) time.Duration {
	if in.Status.StepStarted == nil {
		return 0
	}
	return r.Now().Sub(in.Status.StepStarted.Time)
}

// operatorRoom is whether the operator could run elsewhere once the drain
// evicts it from the node to move.
type operatorRoom struct {
	// refusal is why draining the node would leave the operator nowhere to
	// run; "" when it does not run there or another node can take it.
	refusal string
	// others says, for each other node, why it cannot take the operator.
	others string
	// mayComeBack: some other node is refused only for not being Ready,
	// which its kubelet can mend by itself.
	mayComeBack bool
}

// roomForOperator checks whether draining node would leave the operator
// nowhere to run: some other node must be Ready, schedulable, match its
// node selector and carry no taint its pod does not tolerate.
func (r *Reconciler) roomForOperator(ctx context.Context, node string) (operatorRoom, error) {
	if r.PodName == "" {
		return operatorRoom{}, nil // not running in a pod (tests, out of cluster)
	}
	var self corev1.Pod
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: r.PodNamespace, Name: r.PodName}, &self); err != nil {
		return operatorRoom{}, fmt.Errorf("get the operator's own pod %s/%s: %w", r.PodNamespace, r.PodName, err)
	}
	if self.Spec.NodeName != node {
		return operatorRoom{}, nil
	}
	// Live, not the cache: the test that found it cordoned the only other
	// node right before the retry, and the node informer, still in its
	// back-off from the API server's restart in the store's move, had not
	// seen it — the drain then evicted the operator with nowhere to go.
	var nodes corev1.NodeList
	if err := r.APIReader.List(ctx, &nodes); err != nil {
		return operatorRoom{}, fmt.Errorf("list nodes: %w", err)
	}
	var room operatorRoom
	var why []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Name == node {
			continue
		}
		reason := whyNotRun(&self, n)
		if reason == "" {
			return operatorRoom{}, nil // the drain evicts the operator; it goes on from there
		}
		if reason == notReady(n) { // schedulable; would it do once Ready?
			if also := whyNotRun(&self, onceReady(n)); also != "" {
				reason += "; " + also // Ready or not, it could not take it
			} else {
				room.mayComeBack = true
			}
		}
		why = append(why, n.Name+": "+reason)
	}
	room.others = otherNodes(why)
	room.refusal = fmt.Sprintf("the operator runs on %s, the node to drain, and no other node can take it (%s); make room on another node (its Deployment tolerates the control plane's taint), then raise spec.retry to retry", node, room.others)
	return room, nil
}

// onceReady is n as it would be once its kubelet reports Ready again: Ready
// True, without the taints the node controller keeps on a node that is not
// (node.kubernetes.io/not-ready and unreachable).
func onceReady(n *corev1.Node) *corev1.Node {
	c := n.DeepCopy()
	c.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	c.Spec.Taints = nil
	for _, t := range n.Spec.Taints {
		if t.Key != corev1.TaintNodeNotReady && t.Key != corev1.TaintNodeUnreachable {
			c.Spec.Taints = append(c.Spec.Taints, t)
		}
	}
	return c
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
