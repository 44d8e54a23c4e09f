package operator

import (
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubectl/pkg/drain"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// The drain's impact is read before the node is cordoned (the preflight
// when moving, the cordon step when undoing), again before each drain pass,
// with kubectl drain's own filters (k8s.io/kubectl/pkg/drain): DaemonSet
// and mirror pods stay, finished pods go, a pod without a controller
// refuses the drain. The pods it evicts, and those of them whose emptyDir
// data the eviction deletes, are in the step's Event before any drain.
//
// Invariant: a pod with emptyDir data is evicted only when
// spec.drain.deleteEmptyDirData is true (kubectl's --delete-emptydir-data,
// default false); otherwise the node is refused with one line naming the
// pods and that field, before it is cordoned (the drain step's own check
// fails a cordoned node, which is then uncordoned).
//
// Which evicted pods hold emptyDir data is kubectl's localStorageFilter's
// verdict, not a copy of it: the pods kubectl evicts with
// DeleteEmptyDirData minus those it evicts without. The filter is
// unexported, and its warning is overwritten by the filters after it.

// drainPlan is what draining a node would do now.
type drainPlan struct {
	node     string
	pods     []corev1.Pod // evicted
	emptyDir []string     // ns/name of the evicted pods whose emptyDir data is deleted
	// refusal is why the node may not be drained (nil: it may).
	refusal error
}

// maxNamed bounds the pods a line names; the rest are counted.
const maxNamed = 10

// drainHelper is kubectl drain's helper as the operator drains: grace
// period from each pod, DaemonSet pods ignored, eviction retried every 5 s,
// bounded to DrainPass per call. The operator's own host pods are not the
// drain's (a preflight pod runs on the node while its plan is read; each is
// deleted when its step ends): kubectl would refuse them, as pods without a
// controller.
func (r *Reconciler) drainHelper(ctx context.Context, deleteEmptyDirData bool) *drain.Helper {
	return &drain.Helper{
		Ctx:                  ctx,
		Client:               r.Kube,
		PodSelector:          LabelManagedBy + "!=" + ManagedBy,
		GracePeriodSeconds:   -1,
		IgnoreAllDaemonSets:  true,
		DeleteEmptyDirData:   deleteEmptyDirData,
		EvictErrorRetryDelay: drainRetryDelay,
		Timeout:              r.DrainPass,
		// Evictions run in parallel goroutines that print here; what
		// matters comes back as errors and the pods left.
		Out:    io.Discard,
		ErrOut: io.Discard,
	}
}

// planDrain reads what draining node would do, and whether the spec allows
// it. An error is transient (the pods could not be listed).
func (r *Reconciler) planDrain(ctx context.Context, in *v1.Installation, node string) (drainPlan, error) {
	all, errs := r.drainHelper(ctx, true).GetPodsForDeletion(node)
	if all == nil {
		return drainPlan{}, fmt.Errorf("list the pods on %s: %s", node, joinErrs(errs))
	}
	plan := drainPlan{node: node, pods: all.Pods()}
	if len(errs) > 0 {
		plan.refusal = fmt.Errorf("cannot drain %s: %s; delete or move those pods (kubectl drain would refuse too)", node, joinErrs(errs))
		return plan, nil
	}
	kept, errs := r.drainHelper(ctx, false).GetPodsForDeletion(node)
	if kept == nil {
		return drainPlan{}, fmt.Errorf("list the pods on %s: %s", node, joinErrs(errs))
	}
	evictedWithout := map[types.UID]bool{}
	for _, p := range kept.Pods() {
		evictedWithout[p.UID] = true
	}
	for _, p := range plan.pods {
		if !evictedWithout[p.UID] {
			plan.emptyDir = append(plan.emptyDir, p.Namespace+"/"+p.Name)
		}
	}
	if len(plan.emptyDir) > 0 && !in.Spec.Drain.DeleteEmptyDirData {
		plan.refusal = fmt.Errorf("node %s runs pods with emptyDir data that the drain would delete: %s; set spec.drain.deleteEmptyDirData to true to allow it (as kubectl drain --delete-emptydir-data), or move those pods; nothing was changed",
			node, nameSome(plan.emptyDir))
	}
	return plan, nil
}

// impact says what the drain will do, for the Event before it.
func (d drainPlan) impact() string {
	if len(d.pods) == 0 {
		return "the drain of " + d.node + " evicts no pod"
	}
	names := make([]string, len(d.pods))
	for i, p := range d.pods {
		names[i] = p.Namespace + "/" + p.Name
	}
	s := fmt.Sprintf("the drain of %s evicts %d pods: %s", d.node, len(d.pods), nameSome(names))
	if len(d.emptyDir) > 0 {
		s += fmt.Sprintf("; it deletes the emptyDir data of %s (spec.drain.deleteEmptyDirData)", nameSome(d.emptyDir))
	}
	return s
}

// nameSome joins up to maxNamed names and counts the rest.
func nameSome(names []string) string {
	if len(names) <= maxNamed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxNamed], ", "), len(names)-maxNamed)
}

// joinDetail joins the parts of a step's Event detail that are not empty.
func joinDetail(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "; ")
}
