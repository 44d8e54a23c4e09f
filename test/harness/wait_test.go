package harness

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPollReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	err := Poll(context.Background(), time.Millisecond, time.Minute, func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Poll = %v after %d calls; want nil after 3", err, calls)
	}
}

func TestPollTimesOutWithTheLastReason(t *testing.T) {
	calls := 0
	err := Poll(context.Background(), time.Millisecond, 50*time.Millisecond, func(context.Context) error {
		calls++
		return errors.New("3 pods Pending")
	})
	if err == nil || !strings.Contains(err.Error(), "3 pods Pending") || !strings.Contains(err.Error(), "50ms") {
		t.Fatalf("Poll = %v; want the timeout and the condition's last reason", err)
	}
	if calls < 2 {
		t.Fatalf("%d calls in 50 ms at 1 ms; want several", calls)
	}
}

func TestHoldsLooksForTheWholeDuration(t *testing.T) {
	start, calls := time.Now(), 0
	Holds(t, "always", 3*PollInterval, func(context.Context) error { calls++; return nil })
	if took := time.Since(start); took < 3*PollInterval || calls < 3 {
		t.Fatalf("Holds returned after %v and %d looks; want the whole %v, looking every %v", took, calls, 3*PollInterval, PollInterval)
	}
}
