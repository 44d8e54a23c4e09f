package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/test/harness"
)

// haInstallSteps is the HA move's node steps on three control planes
// (first, join ×2, switch ×3, cutover: hamove.Order).
const haInstallSteps = 7

// TestOperatorHA: the operator's store move on three control planes behind
// a load balancer, and its undo, with the API in use throughout. Before:
// at least minObjects loaded objects, every resourceVersion recorded. Across
// both: the harness's Prober, a writer and two watchers on the load
// balancer. Mid-way through the move (the second control plane's switch:
// three store members, one API server already on the store) the store's
// leader is killed with SIGKILL on its node; its unit brings it back. Then
// spec.undo. Checked: the Installation reaches Moved and then Undone with
// every API server on the store, then on etcd; every loaded object keeps
// its resourceVersion after each; every acknowledged write is there with
// its resourceVersion; no watch saw a resourceVersion go backwards; reads
// never went unanswered for readGapLimit. The move's and undo's times, the
// gaps, the writes' pause around the cut-over and the cut-back, and the
// kill are figures. No node is selected for the runtime (the store's move
// is the point; TestOperator covers the runtime).
func TestOperatorHA(t *testing.T) {
	h := haSetup(t)
	want := h.versions(t)
	if len(want) < minObjects {
		t.Fatalf("%d loaded objects; want at least %d (scripts/kubeadm.sh load %d)", len(want), minObjects, minObjects)
	}
	h.fromScratch(t)
	h.setAsideEarlierStoreData(t)
	h.kubectl(t, "", "label", "node", h.worker, v1.RuntimeLabel+"-")
	runtimeNodes := h.haRuntimeNodes(t)
	for _, n := range runtimeNodes {
		h.kubectl(t, "", "label", "node", n, v1.RuntimeLabel+"="+v1.RuntimeLabelValue, "--overwrite")
	}
	cordons := h.watchCordons(t)
	h.noHostEtcdutl(t)
	restarts := h.leaderRestartsAll(t)

	tr := h.startTraffic(t, fmt.Sprintf("qk-e2e-ha-%d", time.Now().Unix()))
	killKey := haKey(v1.OperationInstall, "switch", h.cps[1])
	var kill leaderKill
	killed := make(chan struct{})
	tl := h.startTimeline(map[string]func(){killKey: func() { defer close(killed); kill = h.killLeader(killKey) }})
	t.Cleanup(tl.Stop)
	h.applyManifest(t)

	ok := t.Run("move", func(t *testing.T) {
		f := h.follow(t, v1.PhaseMoved, 20*time.Minute, false)
		t.Logf("figure: Moved in %.0fs (the store's HA move on %d control planes, its leader killed once)", f.took.Seconds(), len(h.cps))
		if _, seen := tl.span(killKey); !seen {
			t.Fatalf("the move ended before %s was seen running: the store's leader was never killed", killKey)
		}
		select { // the kill's own waits are bounded (killLeader)
		case <-killed:
		case <-time.After(3 * leaderKillTimeout):
			t.Fatalf("the leader kill begun at %s has not ended after %v", killKey, 3*leaderKillTimeout)
		}
		if kill.err != nil {
			t.Errorf("the leader kill: %v", kill.err)
		}
		t.Logf("figure: %v", kill)
		in := f.in
		if in.Status.Store != v1.PhaseMoved || in.Status.HA == nil || in.Status.HA.InstallDone != haInstallSteps || len(in.Status.Nodes) != len(runtimeNodes) {
			t.Errorf("status after the move: store %q, ha %+v, nodes %+v; want Moved, %d install steps done, %d node(s)", in.Status.Store, in.Status.HA, in.Status.Nodes, haInstallSteps, len(runtimeNodes))
		}
		h.checkRuntimes(t, in, runtimeNodes, "quantykube", v1.NodeStateMoved)
		h.runsTheRelease(t, in, "after the move")
		h.apiServersOn(t, "after the move", true)
		h.sameVersions(t, "after the move", want)
		if rt := h.runtimeOf(t, h.worker); rt != "containerd" {
			t.Errorf("%s runs on %q after the move; it was not selected and must stay on containerd", h.worker, rt)
		}
		h.pauseFigure(t, tr, tl, haKey(v1.OperationInstall, "cutover", h.cps[0]), "cutover", "cut-over")
	})
	ok = ok && t.Run("undo", func(t *testing.T) {
		h.patchSpec(t, `{"undo":true}`)
		f := h.follow(t, v1.PhaseUndone, 20*time.Minute, false)
		t.Logf("figure: Undone in %.0fs", f.took.Seconds())
		if f.in.Status.HA != nil {
			t.Errorf("status.ha after the undo: %+v; want none", f.in.Status.HA)
		}
		h.apiServersOn(t, "after the undo", false)
		h.sameVersions(t, "after the undo", want)
		h.checkRuntimes(t, f.in, runtimeNodes, "containerd", v1.NodeStateUndone)
		h.pauseFigure(t, tr, tl, haKey(v1.OperationUndo, "cutback", h.cps[0]), "cutback", "cut-back")
	})
	tl.Stop()
	cordons.stop()
	if cordons.most > 1 {
		t.Errorf("%d control planes were cordoned at once (%v); the operator moves one node at a time", cordons.most, cordons.at)
	}
	if len(runtimeNodes) > 0 {
		t.Logf("figure: the runtime of %v moved and back, at most %d control plane cordoned at once", runtimeNodes, cordons.most)
	}
	tr.check(t)
	h.logSteps(t, tl, tr)
	t.Logf("figure: kube-controller-manager and kube-scheduler restarted %d times on the %d control planes across the run (lost leases)", h.leaderRestartsAll(t)-restarts, len(h.cps))
	if ok {
		h.allPodsRunning(t, "after the undo")
		h.noHostPodsLeft(t)
	}
	if t.Failed() {
		h.explainFailure(t)
	}
}

// explainFailure logs, last (CI keeps the tail of a run's output), what the
// Installation said and the end of the host log of the HA step it stopped
// at: the cause of a failed run without the rest of the output.
func (h *haCluster) explainFailure(t *testing.T) {
	t.Helper()
	in := h.installation()
	if in == nil {
		t.Logf("failure: the Installation cannot be read")
		return
	}
	st := in.Status
	t.Logf("failure: the Installation is %s (store %s), step %q on %q: %s", st.Phase, st.Store, st.Step, st.Node, st.Message)
	if st.HA == nil || st.HA.Step == "" {
		return
	}
	step, node, _ := strings.Cut(st.HA.Step, "/")
	out, err := h.Exec(node, "sh", "-c", fmt.Sprintf("tail -n 25 /var/lib/quantykube/install/store-ha/operator-%s-%s.log", st.HA.Op, step))
	if err != nil {
		t.Logf("failure: the host log of %s on %s: %v", step, node, err)
		return
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		t.Logf("failure: %s %s on %s: %s", st.HA.Op, step, node, l)
	}
}

// pauseFigure logs how long writes paused around an HA step that holds
// them (cutover, cutback): the writer's longest time without an answer
// from 2 s before the step was seen to 2 s after it ended, and what the
// store's leader said it held them for (the host step's output).
func (h *haCluster) pauseFigure(t *testing.T, tr *haTraffic, tl *haTimeline, key, step, what string) {
	t.Helper()
	s, seen := tl.span(key)
	if !seen || s.ended.IsZero() {
		t.Errorf("%s was not seen running and ending: no %s figure", key, what)
		return
	}
	gap, end := tr.writer().LongestGap(s.first.Add(-2*time.Second), s.ended.Add(2*time.Second))
	op := strings.Fields(key)[0]
	held := h.hostLine(h.cps[0], op, step, "writes held")
	t.Logf("figure: %s: the writer's longest time without an acknowledged write from 2 s before to 2 s after the step (%.1fs) was %v, ending %s; the store: %q",
		what, s.ended.Sub(s.first).Seconds(), gap.Round(time.Millisecond), end.UTC().Format("15:04:05.000"), held)
}

// logSteps logs every HA node step as seen, and the step the writer's and
// the Prober's longest gaps ended in (after the traffic stopped).
func (h *haCluster) logSteps(t *testing.T, tl *haTimeline, tr *haTraffic) {
	t.Helper()
	spans := tl.all()
	for _, s := range spans {
		d := "running"
		if !s.ended.IsZero() {
			d = fmt.Sprintf("%.1fs", s.ended.Sub(s.first).Seconds())
		}
		t.Logf("HA step %-34s seen %s for %s", s.key, s.first.UTC().Format("15:04:05.0"), d)
	}
	in := func(at time.Time) string {
		for _, s := range spans {
			if !at.Before(s.first) && (s.ended.IsZero() || !at.After(s.ended)) {
				return "during " + s.key
			}
		}
		return "outside every HA step"
	}
	if acks := tr.writer().Acks(); len(acks) > 0 {
		gap, end := tr.writer().LongestGap(acks[0].At, acks[len(acks)-1].At)
		t.Logf("figure: the writer's longest time without an acknowledged write: %v, ending %s (%s)", gap.Round(time.Millisecond), end.UTC().Format("15:04:05.000"), in(end))
	}
	for _, s := range []harness.Series{tr.avail.Reads, tr.avail.Writes} {
		t.Logf("figure: the Prober's longest %s gap: %v, ending %s (%s)", s.Kind, s.LongestGap.Round(time.Millisecond), s.GapEnd.UTC().Format("15:04:05.000"), in(s.GapEnd))
	}
}

// leaderRestartsAll is harness.LeaderRestarts summed over the control planes.
func (h *haCluster) leaderRestartsAll(t *testing.T) int32 {
	t.Helper()
	var n int32
	for _, cp := range h.cps {
		n += harness.LeaderRestarts(t, h.CS, cp)
	}
	return n
}
