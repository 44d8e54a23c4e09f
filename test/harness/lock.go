package harness

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// EventuallyLocked waits until an install or undo on node holds its lock
// at path (flock(1) cannot take it). The probe takes a free lock for an
// instant, which install's own Lock absorbs (internal/install/lock.go), so
// it never makes the run it waits for refuse itself. A test that wants a
// second run refused starts it after this: a second run started earlier
// could take the lock first and turn the first one away instead.
func (c *Cluster) EventuallyLocked(t testing.TB, node, path string, timeout time.Duration) {
	t.Helper()
	Eventually(t, "a run on "+node+" to hold "+path, timeout, func(context.Context) error {
		if _, err := c.Exec(node, "sh", "-c", `test -e "$1" && ! flock -n "$1" true`, "sh", path); err != nil {
			return fmt.Errorf("%s is not held", path)
		}
		return nil
	})
}
