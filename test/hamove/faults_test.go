package hamove

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quantyroot/quantykube/internal/install/hamove"
)

// faulty runs each node step that has a fault first with it (a failure
// injected after a sub-step, QK_INSTALL_FAIL, or a kill -9 right after
// the journal recorded an event, QK_INSTALL_KILL), expects that run to
// fail, then runs the step again: the rerun must finish or put back the
// interrupted run and complete the step.
type faulty struct {
	*remote
	t      *testing.T
	faults map[string]string // "step" → "QK_INSTALL_KILL=step:sub:event" (first node the step runs on)
	used   map[string]bool
}

func (f *faulty) Step(ctx context.Context, node string, undo bool, step string) (string, error) {
	if env, ok := f.faults[step]; ok && !f.used[step] {
		f.used[step] = true
		f.env = []string{env}
		t0 := time.Now()
		out, err := f.remote.Step(ctx, node, undo, step)
		f.env = nil
		if err == nil {
			f.t.Errorf("%s on %s with %s succeeded, want it to fail", step, node, env)
		}
		f.t.Logf("%s on %s with %s: failed as wanted after %v:\n%s", step, node, env, time.Since(t0).Round(time.Millisecond), lastLines(out, 6))
	}
	return f.remote.Step(ctx, node, undo, step)
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// TestHAMoveFaults moves the control plane and back with one fault in every
// node step (a kill -9 or an injected failure, each at a different point),
// the writer and reader running: every rerun completes its step, and the
// move still keeps every resourceVersion and acknowledged write.
func TestHAMoveFaults(t *testing.T) {
	c := setup(t)
	ctx := context.Background()
	const ns = "hamove-faults"
	c.CS.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	waitGone(t, c, ns)
	if _, err := c.CS.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	tr := newTraffic(c.direct, ns)
	tr.run(tctx, &wg)
	time.Sleep(2 * time.Second)
	f := &faulty{remote: &remote{c: c}, t: t, used: map[string]bool{}, faults: map[string]string{
		hamove.StepFirst:       "QK_INSTALL_KILL=first:start-member:end",
		hamove.StepJoin:        "QK_INSTALL_FAIL=join:level",
		hamove.StepSwitch:      "QK_INSTALL_KILL=switch:start-apiserver:begin",
		hamove.StepCutover:     "QK_INSTALL_KILL=cutover:cutover:end",
		hamove.StepStopEtcd:    "QK_INSTALL_FAIL=stop-etcd:stop-etcd",
		hamove.StepReplayTo:    "QK_INSTALL_KILL=replay-to:replay-to:begin",
		hamove.StepRestoreEtcd: "QK_INSTALL_KILL=restore-etcd:restore:end",
		hamove.StepCutback:     "QK_INSTALL_KILL=cutback:cutback:begin",
		hamove.StepSwitchBack:  "QK_INSTALL_FAIL=switch-back:start-apiserver",
		hamove.StepLeave:       "QK_INSTALL_KILL=leave:member-remove:end",
	}}
	progress := func(s hamove.NodeStep, out string, took time.Duration, err error) {
		t.Logf("%s on %s: %v (err %v)\n%s", s.Step, s.Node, took.Round(time.Millisecond), err, lastLines(out, 4))
	}
	start := time.Now()
	if err := hamove.Drive(ctx, f, c.nodes, false, progress); err != nil {
		t.Fatalf("install: %v\nstatus: %s", err, c.status(false))
	}
	t.Logf("installed with faults in %v:\n%s", time.Since(start).Round(time.Millisecond), c.status(false))
	mid := time.Now()
	if err := hamove.Drive(ctx, f, c.nodes, true, progress); err != nil {
		t.Fatalf("undo: %v\nstatus: %s", err, c.status(true))
	}
	t.Logf("undone with faults in %v:\n%s", time.Since(mid).Round(time.Millisecond), c.status(true))
	time.Sleep(2 * time.Second)
	stop()
	wg.Wait()
	readGap, writeGap := tr.gaps(start, time.Now())
	t.Logf("with faults: longest read gap %v, longest write gap %v; %d reads, %d writes, errors %v", readGap.Round(time.Millisecond), writeGap.Round(time.Millisecond), len(tr.reads), len(tr.writes), tr.errors)
	n := tr.check(t, c.CS)
	t.Logf("%d acknowledged writes kept with their resourceVersions", n)
	for step := range f.faults {
		if !f.used[step] {
			t.Errorf("the fault of %s was never injected", step)
		}
	}
}
