package operator

import (
	"context"
	"fmt"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/internal/operator/hostrun"
)

// storeStep runs install/undo store on the control-plane node through a host
// pod and follows it. The pod follows the host journal; a pod that died
// without a result is replaced (status.attempt+1) by one that reads the
// journal before doing anything. A control plane of several nodes (or a
// move recorded as one, status.ha) takes the HA move instead (haStoreStep).
func (r *Reconciler) storeStep(ctx context.Context, in *v1.Installation) (outcome, error) {
	cps, err := r.controlPlanes(ctx)
	if err != nil {
		return outcome{}, err
	}
	if in.Status.HA != nil || len(cps) > 1 {
		return r.haStoreStep(ctx, in, cps)
	}
	if len(cps) != 1 {
		return outcome{failed: fmt.Errorf("%d control-plane nodes; label the kubeadm control-plane node %s", len(cps), ControlPlaneLabel)}, nil
	}
	j := hostJob{Target: hostrun.Target{Subject: v1.SubjectStore, Op: opOf(in)}, Node: cps[0], Since: in.Status.StepStarted}
	return r.followHostJob(ctx, in, j)
}

// followHostJob drives the host pods of one step: the first is created
// after status.attempt is recorded; a finished one is read and deleted.
func (r *Reconciler) followHostJob(ctx context.Context, in *v1.Installation, j hostJob) (outcome, error) {
	st := &in.Status
	if st.Attempt == 0 {
		st.Attempt = 1 // recorded before the pod exists
		return outcome{progress: "starting host pod"}, nil
	}
	hs, err := r.ensureHostPod(ctx, in, j, st.Attempt)
	if err != nil {
		return outcome{}, err
	}
	if !hs.finished {
		return outcome{progress: fmt.Sprintf("host pod %s running on %s", j.name(st.Attempt), j.Node)}, nil
	}
	if err := r.deleteHostPod(ctx, j, st.Attempt); err != nil {
		return outcome{}, err
	}
	if hs.result != nil {
		switch hs.result.State {
		case hostrun.StateDone, hostrun.StateStarted:
			return outcome{done: true, detail: hs.result.Detail}, nil
		case hostrun.StateRolledBack:
			return outcome{failed: hostPutBack{fmt.Errorf("%s %s rolled back on %s: %s", j.Target.Op, j.Target.Subject, j.Node, hs.result.Detail)}}, nil
		case hostrun.StateRefused:
			return outcome{failed: hostPutBack{fmt.Errorf("%s %s refused on %s, nothing changed: %s", j.Target.Op, j.Target.Subject, j.Node, hs.result.Detail)}}, nil
		}
	}
	if st.Attempt >= maxAttempts {
		return outcome{failed: fmt.Errorf("host pod for %s %s on %s died %d times without a result (last: %s); see /var/lib/quantykube/install/%s on the node", j.Target.Op, j.Target.Subject, j.Node, st.Attempt, hs.reason, j.Target.Subject)}, nil
	}
	st.Attempt++
	return outcome{progress: fmt.Sprintf("host pod died (%s); attempt %d follows the journal", hs.reason, st.Attempt)}, nil
}
