package operator

import (
	"errors"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// adoptOlderStatus reads a status written by an older operator:
//   - one older than status.journalCheck: in the wait-ready step,
//     status.attempt numbered the host-journal check pods. A pass that finds
//     such a status (the operator was upgraded mid-step) carries the number
//     over, so it follows the same check pod instead of starting at 1 again.
//   - one older than status.failed, in the middle of a node's rollback: the
//     failure is recorded from the node's message (its cause), as the
//     runtime step of a move, the only one rolled back then.
func adoptOlderStatus(in *v1.Installation) {
	st := &in.Status
	if st.Step == v1.StepWaitReady && st.JournalCheck == 0 && st.Attempt > 0 {
		st.JournalCheck, st.Attempt = st.Attempt, 0
	}
	if (st.Step == v1.StepRollback || st.Step == v1.StepRollbackWait) && st.Failed == nil && st.Node != "" {
		cause := "the node did not finish within spec.nodeTimeout"
		if i := nodeIndex(st, st.Node); i >= 0 && st.Nodes[i].Message != "" {
			cause = st.Nodes[i].Message
		}
		recordFailed(in, v1.OperationInstall, task{Step: v1.StepRuntime, Node: st.Node}, errors.New(cause), false)
	}
}
