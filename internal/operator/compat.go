package operator

import (
	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// adoptOlderStatus reads a status written by an operator older than
// status.journalCheck: in the wait-ready step, status.attempt numbered the
// host-journal check pods. A pass that finds such a status (the operator was
// upgraded mid-step) carries the number over, so it follows the same check
// pod instead of starting at 1 again.
func adoptOlderStatus(st *v1.InstallationStatus) {
	if st.Step == v1.StepWaitReady && st.JournalCheck == 0 && st.Attempt > 0 {
		st.JournalCheck, st.Attempt = st.Attempt, 0
	}
}
