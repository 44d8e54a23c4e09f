package hamove

import (
	"context"
	"fmt"
	"time"
)

// Remote runs node steps on the control-plane nodes: by hand it is a person
// at each node's shell, for the operator a host pod per step, in tests
// `scripts/kubeadm.sh exec`.
type Remote interface {
	// Step runs `quantykube install|undo store --ha STEP` on node and
	// returns its output; an error means the step failed (and was put back,
	// or is committed and must be rerun: its output says which).
	Step(ctx context.Context, node string, undo bool, step string) (string, error)
}

// Progress is told about each node step when it ends.
type Progress func(s NodeStep, out string, took time.Duration, err error)

// Drive runs the move of the control plane of nodes (the first one first)
// in one direction: Order's steps one at a time (restore-etcd on the other
// nodes fetches replay-to's snapshot from the first node itself). Every
// step is idempotent (a step done answers "nothing to do"), so a Drive that
// stopped (a failed step, the caller killed) is resumed by running it again.
func Drive(ctx context.Context, r Remote, nodes []string, undo bool, progress Progress) error {
	if len(nodes) < 2 {
		return fmt.Errorf("an HA move needs at least 2 control-plane nodes, got %d", len(nodes))
	}
	for _, s := range Order(nodes, undo) {
		t0 := time.Now()
		out, err := r.Step(ctx, s.Node, undo, s.Step)
		if progress != nil {
			progress(s, out, time.Since(t0), err)
		}
		if err != nil {
			return fmt.Errorf("%s on %s: %w", s.Step, s.Node, err)
		}
	}
	return nil
}
