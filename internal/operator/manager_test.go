package operator

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// TestOperatorKilledAtEveryStep runs the real manager (leader election,
// watches, the Installation created when absent) against a real API server,
// and stops it each time a new step is recorded, starting a new one: the
// move still ends in Moved and the undo in Undone.
func TestOperatorKilledAtEveryStep(t *testing.T) {
	api := startTestAPI(t)
	w := newWorld(t, api, true, []string{"cp1"}, []string{"w1"})
	ctx := context.Background()
	// The operator runs as its service account, with the manifest's RBAC.
	applyManifest(t, api.Client, "../../deploy/quantykube.yaml")
	asOperator := operatorConfig(api.Config)

	// The hosts act in the background, as kubelets would.
	hostsCtx, stopHosts := context.WithCancel(ctx)
	defer stopHosts()
	go func() {
		for hostsCtx.Err() == nil {
			w.hosts.tick(t)
			time.Sleep(200 * time.Millisecond)
		}
	}()

	restarts := 0
	run := func(goal v1.Phase) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Minute)
		for time.Now().Before(deadline) {
			mgr, err := NewManager(asOperator, Options{
				Image: "quantykube.local/quantykube:dev", LeaderElect: true,
				MetricsAddr: "0", ProbeAddr: "0", skipNameChecks: true,
				Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
			})
			if err != nil {
				t.Fatal(err)
			}
			mctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- mgr.Start(mctx) }()
			start := stepOf(t, w)
			for time.Now().Before(deadline) && stepOf(t, w) == start {
				time.Sleep(100 * time.Millisecond)
			}
			stop() // the operator dies right after a step was recorded
			if err := <-done; err != nil {
				t.Fatalf("manager: %v", err)
			}
			restarts++
			in := w.installation(t)
			if in.Status.Phase == goal && in.Status.Step == v1.StepDone {
				return
			}
			if in.Status.Phase == v1.PhaseFailed {
				t.Fatalf("Failed: %s", in.Status.Message)
			}
		}
		in := w.installation(t)
		t.Fatalf("not %s after 3 minutes: phase %s step %s (%s)", goal, in.Status.Phase, in.Status.Step, in.Status.Message)
	}
	run(v1.PhaseMoved)
	checkGoal(t, w.installation(t), v1.PhaseMoved)
	t.Logf("moved with %d operator restarts", restarts)

	patchUndo(t, api.Client, true)
	run(v1.PhaseUndone)
	checkGoal(t, w.installation(t), v1.PhaseUndone)
	t.Logf("moved and undone with %d operator restarts", restarts)
	noHostPods(t, api.Client)
}

// stepOf is the recorded (phase, step, node, attempt), or "" before the
// Installation exists.
func stepOf(t *testing.T, w *world) string {
	in := &v1.Installation{}
	if err := w.api.Client.Get(context.Background(), types.NamespacedName{Name: v1.Name}, in); err != nil {
		return ""
	}
	s := in.Status
	return string(s.Phase) + "/" + s.Step + "/" + s.Node + "/" + string(rune('0'+s.Attempt))
}
