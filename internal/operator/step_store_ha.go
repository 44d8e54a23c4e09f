package operator

import (
	"context"
	"fmt"
	"slices"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/internal/install/hamove"
	"github.com/quantyroot/quantykube/internal/operator/hostrun"
)

// The store step on a control plane of several nodes is the HA move
// (ADR 202): hamove's node steps, in hamove.Order over the control-plane
// nodes (sorted by name, the first one first), each a host pod on its node
// running `quantykube install|undo store --ha STEP`, one at a time.
//
// Invariants:
//   - status.ha names the node step now running (index and STEP/NODE) and is
//     written before that step's first host pod exists (status.attempt is
//     set in the same write), so a restarted operator follows the recorded
//     step's pod, or starts it, and never skips or repeats a step blindly
//     (every host step is idempotent: a done one answers "nothing to do").
//   - A step ends well only when its host journal says done; the next step
//     is recorded in the same pass. A host step that failed (rolled back,
//     refused, or its pods died maxAttempts times) fails the store as today;
//     status.ha keeps where it stopped.
//   - A move never starts from an undo that stopped mid-way: only the undo
//     goes on from there.
//   - The undo sequence undoes what the install did (status.ha.installDone):
//     everything once the cut-over was done (hamove.Order's undo), else
//     switch-back for each API server switched and leave, in reverse, for
//     each member made. A run finishes the sequence it began; a spec that
//     turned around meanwhile takes effect when the store step ends (as for
//     every step).

// haStoreStep acts on the HA move's recorded node step once.
func (r *Reconciler) haStoreStep(ctx context.Context, in *v1.Installation, cps []string) (outcome, error) {
	st := &in.Status
	op := opOf(in)
	ha := st.HA
	switch {
	case ha == nil && op == v1.OperationUndo:
		return outcome{done: true, detail: "no HA move on record: nothing to undo"}, nil
	case ha == nil:
		if len(cps) < 3 || len(cps)%2 == 0 {
			return outcome{failed: fmt.Errorf("%d control-plane nodes: the HA move needs an odd number, 3 or more", len(cps))}, nil
		}
		st.HA = &v1.HAStatus{ControlPlanes: slices.Clone(cps), Op: op}
		return r.haBegin(in, 0), nil
	case ha.Op == v1.OperationUndo && op == v1.OperationInstall && int(ha.Index) < len(haSequence(ha)):
		// An undo stopped mid-way (etcd may be stopped, the store replaying
		// onto it): the install's steps, done in this move, would all answer
		// done. Only the undo goes on from here.
		return outcome{failed: fmt.Errorf("the HA undo stopped at step %d of %d (%s); a move cannot start from there: set spec.undo to true to finish the undo first", ha.Index+1, len(haSequence(ha)), ha.Step)}, nil
	case ha.Op != op:
		// The other direction: its sequence starts at its beginning.
		ha.Op = op
		return r.haBegin(in, 0), nil
	}
	seq := haSequence(ha)
	if int(ha.Index) >= len(seq) {
		return haFinished(in, seq), nil
	}
	s := seq[ha.Index]
	if ha.Step != haStepName(s) {
		// Recorded by an operator of another order (or edited): the record
		// and the order must agree before anything runs.
		return outcome{failed: fmt.Errorf("status.ha.step %q is not step %d of the %s sequence (%s); set spec.undo to move back", ha.Step, ha.Index, op, haStepName(s))}, nil
	}
	j := hostJob{Target: hostrun.Target{Subject: v1.SubjectStore, Op: op, HA: s.Step}, Node: s.Node, Since: st.StepStarted}
	out, err := r.followHostJob(ctx, in, j)
	if err != nil {
		return outcome{}, err
	}
	where := fmt.Sprintf("HA step %d of %d (%s on %s)", ha.Index+1, len(seq), s.Step, s.Node)
	switch {
	case out.failed != nil:
		return outcome{failed: fmt.Errorf("%s: %w", where, out.failed)}, nil
	case !out.done:
		return outcome{progress: where + ": " + out.progress}, nil
	}
	r.Log.Info("HA step done", "op", op, "step", s.Step, "node", s.Node, "detail", out.detail)
	if op == v1.OperationInstall {
		ha.InstallDone = ha.Index + 1
	}
	if int(ha.Index)+1 >= len(seq) {
		return haFinished(in, seq), nil
	}
	o := r.haBegin(in, ha.Index+1)
	o.progress = where + " done; " + o.progress
	return o, nil
}

// haBegin records node step i of the sequence as the one running: its name
// and its first host pod's attempt, both before that pod exists. Its host
// pods take status.stepStarted (the store step's start) as --since: each
// node step has its own journal, so a run after it is this step's.
func (r *Reconciler) haBegin(in *v1.Installation, i int32) outcome {
	st := &in.Status
	ha := st.HA
	seq := haSequence(ha)
	if int(i) >= len(seq) {
		ha.Index = i
		return haFinished(in, seq)
	}
	ha.Index, ha.Step = i, haStepName(seq[i])
	st.Attempt = 1
	return outcome{progress: fmt.Sprintf("HA step %d of %d (%s on %s): starting host pod", i+1, len(seq), seq[i].Step, seq[i].Node)}
}

// haFinished ends the store step: an install keeps status.ha (its undo
// needs it); a finished undo forgets it.
func haFinished(in *v1.Installation, seq []hamove.NodeStep) outcome {
	ha := in.Status.HA
	ha.Index, ha.Step = int32(len(seq)), ""
	detail := fmt.Sprintf("%d HA steps on %d control-plane nodes", len(seq), len(ha.ControlPlanes))
	if ha.Op == v1.OperationUndo {
		in.Status.HA = nil
	}
	return outcome{done: true, detail: detail}
}

// haSequence is the node steps of ha's direction (see the invariants above).
func haSequence(ha *v1.HAStatus) []hamove.NodeStep {
	if ha.Op != v1.OperationUndo {
		return hamove.Order(ha.ControlPlanes, false)
	}
	return haUndoSteps(ha.ControlPlanes, int(ha.InstallDone))
}

// haUndoSteps is the undo of the first installDone steps of the install
// sequence over nodes.
func haUndoSteps(nodes []string, installDone int) []hamove.NodeStep {
	inst := hamove.Order(nodes, false)
	if installDone >= len(inst) {
		return hamove.Order(nodes, true)
	}
	done := inst[:max(installDone, 0)]
	var out []hamove.NodeStep
	for _, s := range done {
		if s.Step == hamove.StepSwitch {
			out = append(out, hamove.NodeStep{Node: s.Node, Step: hamove.StepSwitchBack})
		}
	}
	for i := len(done) - 1; i >= 0; i-- {
		if s := done[i]; s.Step == hamove.StepFirst || s.Step == hamove.StepJoin {
			out = append(out, hamove.NodeStep{Node: s.Node, Step: hamove.StepLeave})
		}
	}
	return out
}

// haStepName is a node step as status.ha.step records it: "join/cp2".
func haStepName(s hamove.NodeStep) string { return s.Step + "/" + s.Node }
