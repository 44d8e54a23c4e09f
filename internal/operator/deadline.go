package operator

import (
	"context"
	"fmt"
	"time"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// Deadlines: a node's move (or undo) is bounded by spec.nodeTimeout from
// the node's start, the store step by spec.storeTimeout from the step's
// start (on several control planes, the whole HA sequence). Past its
// deadline a step fails visibly (Degraded, a Warning Event) in the pass
// that sees it, and
//   - an install whose host work may have begun is rolled back by the
//     subject's own undo (step_rollback.go): a node's runtime or wait-ready
//     step by `undo runtime` on the node, the store step of one control
//     plane by `undo store`, both bounded by the same deadline again;
//   - anything else fails where it stands: a node's cordon or drain (no
//     host work began; the node is put back), an undo (there is nothing
//     further back), and the HA store move, whose undo runs node steps on
//     other nodes than the step in flight: spec.undo undoes the steps done.
//
// A timeout that is not positive is refused before a run (validateSpec);
// one edited mid-run to such a value counts as its default.

// nodeTimeout is spec.nodeTimeout, or its default.
func (r *Reconciler) nodeTimeout(in *v1.Installation) time.Duration {
	if in.Spec.NodeTimeout != nil && in.Spec.NodeTimeout.Duration > 0 {
		return in.Spec.NodeTimeout.Duration
	}
	return defaultNodeTimeout
}

// storeTimeout is spec.storeTimeout, or its default.
func (r *Reconciler) storeTimeout(in *v1.Installation) time.Duration {
	if in.Spec.StoreTimeout != nil && in.Spec.StoreTimeout.Duration > 0 {
		return in.Spec.StoreTimeout.Duration
	}
	return defaultStoreTimeout
}

// pastDeadline says why t is past its deadline, or nil.
func (r *Reconciler) pastDeadline(in *v1.Installation, t task) error {
	st := &in.Status
	if t.Node == "" {
		if t.Step != v1.StepStore || st.StepStarted == nil || r.Now().Sub(st.StepStarted.Time) <= r.storeTimeout(in) {
			return nil
		}
		return fmt.Errorf("the store step did not finish within %v (spec.storeTimeout); last: %s", r.storeTimeout(in), st.Message)
	}
	i := nodeIndex(st, t.Node)
	if i < 0 || st.Nodes[i].Start == nil {
		return nil
	}
	if r.Now().Sub(st.Nodes[i].Start.Time) <= r.nodeTimeout(in) {
		return nil
	}
	return fmt.Errorf("node %s did not finish within %v (spec.nodeTimeout); last: %s", t.Node, r.nodeTimeout(in), st.Nodes[i].Message)
}

// rollsBack reports whether t, past its deadline, is rolled back by its
// subject's own undo rather than failed where it stands. An error is
// transient.
func (r *Reconciler) rollsBack(ctx context.Context, in *v1.Installation, t task) (bool, error) {
	if opOf(in) != v1.OperationInstall {
		return false, nil
	}
	if t.Node != "" {
		return t.Step == v1.StepRuntime || t.Step == v1.StepWaitReady, nil
	}
	if in.Status.HA != nil {
		return false, nil
	}
	cps, err := r.controlPlanes(ctx)
	if err != nil {
		return false, err
	}
	return len(cps) == 1, nil
}
