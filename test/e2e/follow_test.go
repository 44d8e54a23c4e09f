package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

const operatorSelector = "app.kubernetes.io/name=quantykube-operator"

// followPoll is how often follow reads the Installation: steps are
// recorded a second or more apart, so a quarter of that sees every one,
// however short.
const followPoll = 250 * time.Millisecond

// followed is what follow saw of a run.
type followed struct {
	in   *v1.Installation // the status at the goal
	took time.Duration    // from follow's start to the goal seen
	// began is when each step (stepKey) was first seen running, since
	// follow's start.
	began map[string]time.Duration
}

// stepKey names a running step in followed.began.
func stepKey(phase v1.Phase, step v1.Step, node string) string {
	return string(phase) + "/" + string(step) + "/" + node
}

// follow prints every change of the Installation's status line until its
// phase is goal with no step running, and returns what it saw. With kill,
// the operator pod is killed (grace 0) once at every step the status
// records: the replacement must read the status and go on.
func (c *cluster) follow(t *testing.T, goal v1.Phase, timeout time.Duration, kill bool) followed {
	t.Helper()
	start := time.Now()
	f := followed{began: map[string]time.Duration{}}
	killed := map[string]bool{}
	var seen []string      // steps in the order first seen
	var waitFrom time.Time // the last kill (or nudge) while no operator runs
	nudges := 0
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), followPoll, timeout, true, func(context.Context) (bool, error) {
		in := c.installation()
		if in == nil {
			return false, nil // not created yet, or the API server is away
		}
		st := in.Status
		line := fmt.Sprintf("%-8s %-13s %-8s %s", st.Phase, st.Step, st.Node, st.Message)
		if line != last {
			t.Logf("%6.1fs  %s", time.Since(start).Seconds(), line)
			last = line
		}
		running := st.Step != "" && st.Step != v1.StepDone
		// Only a status written for the current spec counts (a patch has
		// just changed it; the old phase stands until the operator reads it).
		current := st.ObservedGeneration == in.Generation
		if st.Phase == goal && !running && current {
			f.in, f.took = in, time.Since(start)
			return true, nil
		}
		if st.Phase == v1.PhaseFailed && goal != v1.PhaseFailed && !running && current {
			return false, fmt.Errorf("the Installation failed: %s", st.Message)
		}
		key := stepKey(st.Phase, st.Step, st.Node)
		if running && !slices.Contains(seen, key) {
			seen = append(seen, key)
			f.began[key] = time.Since(start)
		}
		if kill && running && !killed[key] {
			// A step stays recorded until an operator acts on it, and none
			// acts between a kill and its replacement running: every step
			// seen is killed at, once.
			if n := c.killOperator(); n > 0 {
				killed[key] = true
				waitFrom = time.Now()
				t.Logf("%6.1fs  killed the operator at %s", time.Since(start).Seconds(), key)
			}
		}
		if !waitFrom.IsZero() && time.Since(waitFrom) > replaceWait {
			if c.operatorRunning() {
				waitFrom = time.Time{}
			} else if err := c.nudgeOperatorReplicaSet(); err == nil {
				nudges++
				waitFrom = time.Now()
				t.Logf("%6.1fs  figure: no operator pod %v after the kill: kube-controller-manager's ReplicaSet controller is stuck (nudge_test.go); its ReplicaSet annotated to wake it", time.Since(start).Seconds(), replaceWait)
			}
		}
		return false, nil
	})
	if err != nil {
		c.dumpCluster(t)
		t.Fatalf("no %s within %v: %v; last: %s", goal, timeout, err, last)
	}
	if kill {
		var missed []string
		for _, k := range seen {
			if !killed[k] {
				missed = append(missed, k)
			}
		}
		t.Logf("the operator was killed at %d of %d steps; its ReplicaSet nudged %d times", len(seen)-len(missed), len(seen), nudges)
		if len(missed) > 0 {
			t.Errorf("steps never killed at: %v", missed)
		}
	}
	return f
}

// killOperator kills the operator where it runs, now: its pod is deleted
// with grace 0 (the Deployment makes a new one) and its process is sent
// SIGKILL on the node (a force-deleted pod's container would otherwise go
// on acting until the kubelet stops it). It says how many it killed; 0
// while none runs or the API server is away.
func (c *cluster) killOperator() int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := c.runningOperatorPods()
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range pods {
		if err := c.CS.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			continue
		}
		// The Deployment's command line (host pods run "operator host"); the
		// bracket keeps this shell's own command line from matching.
		_, _ = c.Exec(p.Spec.NodeName, "sh", "-c",
			`for d in /proc/[0-9]*; do tr '\0' ' ' <"$d/cmdline" 2>/dev/null | grep -q "operato[r] --leader-elect" && kill -9 "${d#/proc/}"; done; true`)
		n++
	}
	return n
}

// noHostPodsLeft fails the test if an installer pod stayed behind.
func (c *cluster) noHostPodsLeft(t *testing.T) {
	t.Helper()
	pods, err := c.CS.CoreV1().Pods("quantykube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=quantykube-operator"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Errorf("installer pods left behind: %d, e.g. %s", len(pods.Items), pods.Items[0].Name)
	}
}

// printEvents logs the Installation's Events (each step with its measured impact).
func (c *cluster) printEvents(t *testing.T, since time.Time) {
	t.Helper()
	evs, err := c.CS.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Installation"})
	if err != nil {
		t.Logf("events: %v", err)
		return
	}
	at := func(e corev1.Event) time.Time {
		if !e.LastTimestamp.IsZero() {
			return e.LastTimestamp.Time
		}
		return e.EventTime.Time
	}
	items := evs.Items
	sort.SliceStable(items, func(i, j int) bool { return at(items[i]).Before(at(items[j])) })
	for _, e := range items {
		if at(e).Before(since.Truncate(time.Second)) {
			continue
		}
		t.Logf("event %-8s %-12s %s", e.Type, e.Reason, e.Message)
	}
}
