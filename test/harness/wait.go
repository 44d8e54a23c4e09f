package harness

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Every wait in the cluster tests is on a condition, through apimachinery's
// wait, with a timeout; none is a fixed sleep standing in for one. A
// condition is a func(ctx) error: nil when it holds, else why not yet (a
// transient API error is a "not yet" too), so that a timeout can say what
// was last seen.
const (
	// PollInterval is how often Eventually, WaitFor and Holds look.
	PollInterval = 500 * time.Millisecond
	// RetryInterval and RetryTimeout bound Retry: API calls across an
	// API-server restart (the store move restarts it; ~3 s here, more under
	// load).
	RetryInterval = time.Second
	RetryTimeout  = time.Minute
)

// Poll calls f at once and then every interval until it returns nil; it
// returns nil, or, once timeout has passed or ctx ended, an error carrying
// f's last error.
func Poll(ctx context.Context, interval, timeout time.Duration, f func(context.Context) error) error {
	last := errors.New("not tried")
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		last = f(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("not within %v: %w", timeout, last)
	}
	return nil
}

// Eventually polls f (every PollInterval) until it returns nil, and fails
// the test after timeout with what names the condition and f's last error.
func Eventually(t testing.TB, what string, timeout time.Duration, f func(context.Context) error) {
	t.Helper()
	if err := Poll(context.Background(), PollInterval, timeout, f); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Holds checks that f keeps returning nil for the whole of d (looking every
// PollInterval, at once first), and fails the test at its first error. f is
// given a context that outlives d, so a call in flight at the end is not
// cut short into a false failure.
func Holds(t testing.TB, what string, d time.Duration, f func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var broke error
	_ = wait.PollUntilContextCancel(ctx, PollInterval, true, func(context.Context) (bool, error) {
		broke = f(context.Background())
		return broke != nil, nil
	})
	if broke != nil {
		t.Fatalf("%s: did not hold for %v: %v", what, d, broke)
	}
}

// WaitFor polls ok every PollInterval and fails the test after timeout.
func WaitFor(t testing.TB, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	Eventually(t, "waiting for "+what, timeout, func(context.Context) error {
		if ok() {
			return nil
		}
		return errors.New("not yet")
	})
}

// Retry calls f every RetryInterval until it succeeds, for at most
// RetryTimeout (API calls across an API-server restart), and returns nil or
// an error carrying f's last one.
func Retry(f func() error) error {
	return Poll(context.Background(), RetryInterval, RetryTimeout, func(context.Context) error { return f() })
}
