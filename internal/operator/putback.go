package operator

import (
	"context"
	"errors"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// A node whose run fails is left as it was before the run began, as far as
// the operator knows that state: uncordoned again if we cordoned it
// (nodes[].wasCordoned, recorded before the first cordon, says whether we
// did), and left cordoned if it was cordoned before. That holds when
//   - the failure came before any host work (cordon, drain), or
//   - the host reports its own work put back (hostPutBack: the installer
//     refused, changing nothing, or rolled back), or
//   - the node's own undo (the rollback after its deadline) ended well:
//     Ready on its old runtime.
//
// A node whose host state is unknown (host pods died, a rollback that did
// not finish, an undo past its deadline) stays cordoned: a person looks
// first, and spec.undo or spec.retry goes on from there.

// hostPutBack marks a step failure after which the host reports its own
// work put back: the node's runtime is as before the run.
type hostPutBack struct{ err error }

func (e hostPutBack) Error() string { return e.err.Error() }
func (e hostPutBack) Unwrap() error { return e.err }

// leftAsBefore reports whether the failure of node step s for cause left
// the node's runtime as it was before the run.
func leftAsBefore(s v1.Step, cause error) bool {
	switch s {
	case v1.StepCordon, v1.StepDrain:
		return true
	case v1.StepRuntime, v1.StepWaitReady:
		var pb hostPutBack
		return errors.As(cause, &pb)
	}
	return false
}

// cordonedByUs reports whether the run cordoned n, which was schedulable
// before it.
func cordonedByUs(n *v1.NodeStatus) bool { return n.CordonRecorded && !n.WasCordoned }

// putNodeBack uncordons node i of st if we cordoned it, and reports
// whether that changed the node (a failure before the cordon leaves
// nothing to change).
func (r *Reconciler) putNodeBack(ctx context.Context, st *v1.InstallationStatus, i int) (bool, error) {
	n := &st.Nodes[i]
	if !cordonedByUs(n) {
		return false, nil
	}
	return r.setUnschedulable(ctx, n.Name, false)
}
