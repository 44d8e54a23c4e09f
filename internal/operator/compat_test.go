package operator

import (
	"testing"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

func TestAdoptOlderStatus(t *testing.T) {
	for _, tc := range []struct {
		name          string
		in            v1.InstallationStatus
		attempt, jchk int32
	}{
		{"an older operator's journal check in wait-ready", v1.InstallationStatus{Step: v1.StepWaitReady, Attempt: 2}, 0, 2},
		{"already in the new form", v1.InstallationStatus{Step: v1.StepWaitReady, JournalCheck: 3}, 0, 3},
		{"another step's attempt stays", v1.InstallationStatus{Step: v1.StepStore, Attempt: 2}, 2, 0},
	} {
		st := tc.in
		adoptOlderStatus(&st)
		if st.Attempt != tc.attempt || st.JournalCheck != tc.jchk {
			t.Errorf("%s: attempt %d, journalCheck %d; want %d, %d", tc.name, st.Attempt, st.JournalCheck, tc.attempt, tc.jchk)
		}
	}
}
