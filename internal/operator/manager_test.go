package operator

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// TestOperatorKilledAtEveryStep runs the real manager (leader election,
// watches, the Installation created when absent) against a real API server,
// and stops it each time a new step is recorded, starting a new one: the
// move still ends in Moved and the undo in Undone.
func TestOperatorKilledAtEveryStep(t *testing.T) {
	api := startTestAPI(t)
	w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
	w.dropEmptyDir(t)
	ctx := context.Background()
	// The operator runs as its service account, with the manifest's RBAC.
	applyManifest(t, api.Client, "../../deploy/quantykube.yaml")
	asOperator := operatorConfig(api.Config)

	// The hosts act in the background, as kubelets would.
	hostsCtx, stopHosts := context.WithCancel(ctx)
	hostsDone := make(chan struct{})
	defer func() { stopHosts(); <-hostsDone }()
	go func() {
		defer close(hostsDone)
		wait.UntilWithContext(hostsCtx, func(context.Context) { w.hosts.tick(t) }, hostTick)
	}()

	k := &killer{t: t, w: w, cfg: asOperator}
	run := func(goal v1.Phase) {
		t.Helper()
		// Restart the operator once per step recorded, until the goal.
		err := wait.PollUntilContextTimeout(ctx, stepWatch, runTimeout, true, func(ctx context.Context) (bool, error) {
			return k.runOneStep(ctx, goal)
		})
		if err != nil {
			in := w.installation(t)
			t.Fatalf("not %s after %v (%v): phase %s step %s (%s)", goal, runTimeout, err, in.Status.Phase, in.Status.Step, in.Status.Message)
		}
	}
	run(v1.PhaseMoved)
	checkGoal(t, w.installation(t), v1.PhaseMoved)
	t.Logf("moved with %d operator restarts", k.restarts)

	patchUndo(t, api.Client, true)
	run(v1.PhaseUndone)
	checkGoal(t, w.installation(t), v1.PhaseUndone)
	t.Logf("moved and undone with %d operator restarts", k.restarts)
	noHostPods(t, api.Client)
}

// killer runs the real manager until the next step is recorded, then stops
// it, as a kill of the operator would.
type killer struct {
	t        *testing.T
	w        *world
	cfg      *rest.Config
	restarts int
}

// runOneStep starts a manager, stops it once the recorded step changes (or
// ctx ends), and reports whether the Installation reached goal; a Failed
// one is an error.
func (k *killer) runOneStep(ctx context.Context, goal v1.Phase) (bool, error) {
	mgr, err := NewManager(k.cfg, Options{
		Image: "quantykube.local/quantykube:dev", LeaderElect: true,
		MetricsAddr: "0", ProbeAddr: "0", skipNameChecks: true,
		Log: slog.New(slog.NewTextHandler(testWriter{k.t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return false, err
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	start := stepOf(k.w)
	// Until a new step is recorded; ctx's end is the caller's timeout.
	werr := wait.PollUntilContextCancel(ctx, stepWatch, true, func(context.Context) (bool, error) {
		return stepOf(k.w) != start, nil
	})
	stop() // the operator dies right after a step was recorded
	if err := <-done; err != nil {
		return false, fmt.Errorf("manager: %w", err)
	}
	if werr != nil {
		return false, werr
	}
	k.restarts++
	in := k.w.installation(k.t)
	if in.Status.Phase == v1.PhaseFailed {
		return false, fmt.Errorf("the Installation failed: %s", in.Status.Message)
	}
	return in.Status.Phase == goal && in.Status.Step == v1.StepDone, nil
}

// Waits of TestOperatorKilledAtEveryStep.
const (
	hostTick   = 200 * time.Millisecond // the fake hosts act, as kubelets would
	stepWatch  = 100 * time.Millisecond // a new step recorded
	runTimeout = 3 * time.Minute        // a move, or an undo, with a restart at every step
)

// stepOf is the recorded (phase, step, node, attempt, journal check), or ""
// before the Installation exists (or while it cannot be read).
func stepOf(w *world) string {
	in := &v1.Installation{}
	if err := w.api.Client.Get(context.Background(), types.NamespacedName{Name: v1.Name}, in); err != nil {
		return ""
	}
	s := in.Status
	return fmt.Sprintf("%s/%s/%s/%d/%d", s.Phase, s.Step, s.Node, s.Attempt, s.JournalCheck)
}
