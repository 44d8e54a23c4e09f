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

// TestConfChangesBackToBack proposes each conf change as soon as the one
// before it is answered: raft drops a conf change proposed while it has not
// yet seen the previous one applied, so a proposer answered before raft's
// Advance timed out now and then (answerConfChanges).
func TestConfChangesBackToBack(t *testing.T) {
	ms := newTestCluster(t, 1)
	waitLeader(t, ms)
	ctx := context.Background()
	for i := 0; i < 40; i++ {
		m, err := ms[0].rep.AddMember(ctx, []string{freePeerURL(t)}, true)
		if err != nil {
			t.Fatalf("change %d, add learner: %v", 2*i, err)
		}
		if err := ms[0].rep.RemoveMember(ctx, m.ID); err != nil {
			t.Fatalf("change %d, remove learner: %v", 2*i+1, err)
		}
	}
}
