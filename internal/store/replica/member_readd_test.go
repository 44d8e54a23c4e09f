package replica

import (
	"context"
	"testing"
)

// TestAddAgainRightAfterRemove: a learner added, removed and added again
// with the same peer URL within one second (a rolled-back join rerun at
// once) gets a new member id instead of the removed one's refusal.
func TestAddAgainRightAfterRemove(t *testing.T) {
	ms := newTestCluster(t, 1)
	waitLeader(t, ms)
	ctx := context.Background()
	peer := freePeerURL(t)
	m1, err := ms[0].rep.AddMember(ctx, []string{peer}, true)
	if err != nil {
		t.Fatalf("add learner: %v", err)
	}
	if err := ms[0].rep.RemoveMember(ctx, m1.ID); err != nil {
		t.Fatalf("remove learner: %v", err)
	}
	m2, err := ms[0].rep.AddMember(ctx, []string{peer}, true)
	if err != nil {
		t.Fatalf("add the same peer URL again right after its remove: %v", err)
	}
	if m2.ID == m1.ID {
		t.Fatalf("the re-added member got the removed id %x", m1.ID)
	}
}
