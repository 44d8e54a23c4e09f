package operator

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// Namespace is where the operator and its host pods live.
const Namespace = "quantykube-system"

// Pass intervals: a step in progress is looked at again after stepPoll; a new
// step starts stepGap after the previous one was recorded.
const (
	stepPoll = 3 * time.Second
	stepGap  = time.Second
)

// defaultNodeTimeout applies when spec.nodeTimeout is unset.
const defaultNodeTimeout = 10 * time.Minute

// Reconciler moves the cluster as the Installation asks.
type Reconciler struct {
	Client client.Client
	// APIReader reads what the operator must not cache: the Installation
	// at the start of each pass (always the latest status), the step's host
	// pod (the informer lags after an API-server restart) and kube-system's
	// ConfigMaps (its RBAC allows get, not list/watch); default Client.
	APIReader client.Reader
	// Kube is used by the drain (k8s.io/kubectl/pkg/drain needs a clientset).
	Kube     kubernetes.Interface
	Recorder record.EventRecorder
	Log      *slog.Logger
	// Image is the quantykube image the host pods run.
	Image string
	// Namespace of the host pods (default Namespace).
	Namespace string
	// DrainPass bounds the eviction wait of one pass (default 20 s).
	DrainPass time.Duration
	// CheckGrace: a node still Ready on its old runtime this long after the
	// runtime step is checked through its journal (default 2 min).
	CheckGrace time.Duration
	// PodName and PodNamespace name the operator's own pod (downward API),
	// so it never drains the node it runs on with nowhere to go; empty
	// outside a pod.
	PodName, PodNamespace string
	// Now is the clock (tests).
	Now func() time.Time

	pending []pendingEvent // Events of this pass, sent with its status write
}

// outcome is what acting on a step in one pass found.
type outcome struct {
	done     bool   // the step ended well
	failed   error  // the step failed for good
	progress string // one line for status.message while it runs
	detail   string // measured impact, for the step's Event
}

// Reconcile runs one pass.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.defaults()
	r.pending = nil
	// Read past the cache: a pass right after our own status write would
	// otherwise act on the step before it (and repeat its Events) until
	// the write conflicts.
	in := &v1.Installation{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, in); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if in.Name != v1.Name {
		return ctrl.Result{}, r.refuse(ctx, in, "NotTheInstallation",
			fmt.Sprintf("only the Installation named %q is acted on; delete %q and edit %q instead", v1.Name, in.Name, v1.Name))
	}
	st := &in.Status
	if st.Step == "" || st.Step == v1.StepDone {
		return r.startRun(ctx, in)
	}
	return r.runStep(ctx, in)
}

func (r *Reconciler) defaults() {
	if r.Namespace == "" {
		r.Namespace = Namespace
	}
	if r.DrainPass == 0 {
		r.DrainPass = 20 * time.Second
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.CheckGrace == 0 {
		r.CheckGrace = 2 * time.Minute
	}
	if r.APIReader == nil {
		r.APIReader = r.Client
	}
	if r.Log == nil {
		r.Log = slog.Default()
	}
}

// startRun begins a run in the spec's direction, or records that the goal
// stands. Bad input is refused here, before anything is touched.
func (r *Reconciler) startRun(ctx context.Context, in *v1.Installation) (ctrl.Result, error) {
	st := &in.Status
	undo := undoing(in)
	if st.Phase == v1.PhaseFailed && st.ObservedGeneration == in.Generation {
		return ctrl.Result{}, nil // waits for a spec change (undo, or a retry)
	}
	_, problem, err := r.validate(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if problem != "" {
		return ctrl.Result{}, r.refuse(ctx, in, "Unsupported", problem)
	}
	if !undo {
		if err := r.refreshNodes(ctx, in); err != nil {
			return ctrl.Result{}, err
		}
	}
	t, ok := firstTask(st, in.Spec.Store, undo)
	st.ObservedGeneration = in.Generation
	if !ok {
		goal := goalPhase(undo)
		if st.Phase == goal && st.Step == v1.StepDone {
			return ctrl.Result{}, nil
		}
		st.Phase, st.Step, st.Node, st.StepStarted, st.Attempt = goal, v1.StepDone, "", nil, 0
		st.Message = summary(in)
		r.setConditions(in, true, false, "", st.Message)
		return ctrl.Result{}, r.writeStatus(ctx, in)
	}
	st.Phase = runPhase(undo)
	r.begin(in, t)
	r.Log.Info("run started", "phase", st.Phase, "step", t.Step, "node", t.Node)
	return ctrl.Result{RequeueAfter: stepGap}, r.writeStatus(ctx, in)
}

// refreshNodes adds every node the selector matches to status.nodes (as
// Pending), in name order after those already there.
func (r *Reconciler) refreshNodes(ctx context.Context, in *v1.Installation) error {
	sel := in.Spec.Runtime.NodeSelector
	if len(sel) == 0 {
		return nil
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(sel)}); err != nil {
		return fmt.Errorf("list nodes matching %v: %w", sel, err)
	}
	names := make([]string, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	for _, name := range names {
		if nodeIndex(&in.Status, name) < 0 {
			in.Status.Nodes = append(in.Status.Nodes, v1.NodeStatus{Name: name, State: string(v1.PhasePending)})
		}
	}
	return nil
}

// begin records t as the running step (status is written by the caller
// before anything acts on it).
func (r *Reconciler) begin(in *v1.Installation, t task) {
	st := &in.Status
	now := metav1.NewTime(r.Now())
	st.Step, st.Node, st.StepStarted, st.Attempt = t.Step, t.Node, &now, 0
	if t.Node == "" {
		st.Store = string(st.Phase)
	} else if i := nodeIndex(st, t.Node); i >= 0 {
		n := &st.Nodes[i]
		if t.Step == firstNodeStep(undoing(in)) {
			switch n.State {
			case string(v1.PhasePending), string(v1.PhaseMoved), string(v1.PhaseUndone):
				// A clean start: cordonStep records whether the node was
				// cordoned before us.
				n.WasCordoned, n.CordonRecorded = false, false
			default:
				// Failed or interrupted mid-way: we may have cordoned it
				// ourselves; the earlier record stands.
			}
			n.Start, n.End, n.Message = &now, nil, ""
		}
		n.State = t.Step
	}
	st.Message = progressLine(in, "starting")
	r.setConditions(in, false, true, "", st.Message)
	r.event(in, corev1.EventTypeNormal, "StepStarted", stepName(in, t))
	stepsStarted.WithLabelValues(t.Step, opOf(in)).Inc()
}

// runStep acts on the recorded step once and records what it found.
func (r *Reconciler) runStep(ctx context.Context, in *v1.Installation) (ctrl.Result, error) {
	st := &in.Status
	t := task{Step: st.Step, Node: st.Node}
	if t.Step == v1.StepRollback || t.Step == v1.StepRollbackWait {
		return r.runRollback(ctx, in, t)
	}
	if t.Node != "" {
		if i := nodeIndex(st, t.Node); i >= 0 && st.Nodes[i].Start != nil {
			if late := r.Now().Sub(st.Nodes[i].Start.Time); late > r.nodeTimeout(in) {
				cause := fmt.Errorf("node %s did not finish within %v (spec.nodeTimeout); last: %s", t.Node, r.nodeTimeout(in), st.Nodes[i].Message)
				if hostWorkMayHaveBegun(in, t) {
					return ctrl.Result{RequeueAfter: stepGap}, r.startRollback(ctx, in, t, cause)
				}
				return ctrl.Result{}, r.fail(ctx, in, t, cause)
			}
		}
	}
	out, err := r.act(ctx, in, t)
	if err != nil {
		// A transient error (API server restarting during the store move):
		// nothing recorded, the pass is retried.
		r.Log.Warn("step pass", "step", t.Step, "node", t.Node, "err", err)
		return ctrl.Result{RequeueAfter: stepPoll}, nil
	}
	switch {
	case out.failed != nil:
		return ctrl.Result{}, r.fail(ctx, in, t, out.failed)
	case out.done:
		return r.end(ctx, in, t, out.detail)
	default:
		st.Message = progressLine(in, out.progress)
		if i := nodeIndex(st, t.Node); i >= 0 {
			st.Nodes[i].Message = out.progress
		}
		r.setConditions(in, false, true, "", st.Message)
		return ctrl.Result{RequeueAfter: stepPoll}, r.writeStatus(ctx, in)
	}
}

func (r *Reconciler) act(ctx context.Context, in *v1.Installation, t task) (outcome, error) {
	switch t.Step {
	case v1.StepStore:
		return r.storeStep(ctx, in)
	case v1.StepPreflight:
		return r.preflightStep(ctx, in, t.Node)
	case v1.StepCordon:
		return r.cordonStep(ctx, in, t.Node)
	case v1.StepDrain:
		return r.drainStep(ctx, in, t.Node)
	case v1.StepRuntime:
		return r.runtimeStep(ctx, in, t.Node)
	case v1.StepWaitReady:
		return r.waitReadyStep(ctx, in, t.Node)
	case v1.StepUncordon:
		return r.uncordonStep(ctx, in, t.Node)
	}
	return outcome{failed: fmt.Errorf("unknown step %q in status; set spec.undo to move back", t.Step)}, nil
}

// end records t as ended well and the next step as begun, in one write.
func (r *Reconciler) end(ctx context.Context, in *v1.Installation, t task, detail string) (ctrl.Result, error) {
	st := &in.Status
	undo := st.Phase == v1.PhaseUndoing
	now := metav1.NewTime(r.Now())
	if st.StepStarted != nil {
		stepSeconds.WithLabelValues(t.Step, opOf(in)).Observe(now.Sub(st.StepStarted.Time).Seconds())
	}
	stepsEnded.WithLabelValues(t.Step, opOf(in), "done").Inc()
	r.deleteStepPods(ctx)
	msg := stepName(in, t) + " done"
	if detail != "" {
		msg += ": " + detail
	}
	r.event(in, corev1.EventTypeNormal, "StepDone", msg)
	if t.Node == "" {
		st.Store = string(goalPhase(undo))
	} else if i := nodeIndex(st, t.Node); i >= 0 && t.Step == v1.StepUncordon {
		st.Nodes[i].State, st.Nodes[i].End, st.Nodes[i].Message = string(goalPhase(undo)), &now, ""
	}
	if undoing(in) != undo {
		// The spec turned around while the step ran: the next pass starts a
		// run in the new direction from here.
		st.Step, st.Node, st.StepStarted = "", "", nil
		return ctrl.Result{RequeueAfter: stepGap}, r.writeStatus(ctx, in)
	}
	next, ok := nextTask(st, in.Spec.Store, undo, t)
	if !ok {
		st.Phase, st.Step, st.Node, st.StepStarted, st.Attempt = goalPhase(undo), v1.StepDone, "", nil, 0
		st.Message = summary(in)
		r.setConditions(in, true, false, "", st.Message)
		r.event(in, corev1.EventTypeNormal, string(st.Phase), st.Message)
		return ctrl.Result{}, r.writeStatus(ctx, in)
	}
	r.begin(in, next)
	return ctrl.Result{RequeueAfter: stepGap}, r.writeStatus(ctx, in)
}

// fail records t as failed: phase Failed, Degraded with what to do. The host
// installers have already put their own work back; a node cordoned by us
// before its runtime step started is uncordoned.
func (r *Reconciler) fail(ctx context.Context, in *v1.Installation, t task, cause error) error {
	st := &in.Status
	now := metav1.NewTime(r.Now())
	stepsEnded.WithLabelValues(t.Step, opOf(in), "failed").Inc()
	r.deleteStepPods(ctx)
	what := "set spec.undo to true to move everything back, or fix the cause and change the spec to retry"
	if st.Phase == v1.PhaseUndoing {
		what = "fix the cause and change the spec (e.g. set spec.undo false, then true) to retry"
	}
	if t.Node == "" {
		st.Store = string(v1.PhaseFailed)
	} else if i := nodeIndex(st, t.Node); i >= 0 {
		n := &st.Nodes[i]
		if (t.Step == v1.StepCordon || t.Step == v1.StepDrain) && n.CordonRecorded && !n.WasCordoned {
			if err := r.setUnschedulable(ctx, t.Node, false); err != nil {
				r.Log.Warn("uncordon after failure", "node", t.Node, "err", err)
			}
		}
		n.State, n.End, n.Message = string(v1.PhaseFailed), &now, cause.Error()
	}
	st.Phase, st.Step, st.StepStarted = v1.PhaseFailed, "", nil
	st.ObservedGeneration = in.Generation
	st.Message = fmt.Sprintf("%s failed: %v", stepName(in, t), cause)
	r.setConditions(in, false, false, "StepFailed", st.Message+"; "+what)
	r.event(in, corev1.EventTypeWarning, "StepFailed", st.Message)
	r.Log.Error("step failed", "step", t.Step, "node", t.Node, "err", cause)
	return r.writeStatus(ctx, in)
}

// refuse sets Degraded for bad input and touches nothing else.
func (r *Reconciler) refuse(ctx context.Context, in *v1.Installation, reason, msg string) error {
	c := meta.FindStatusCondition(in.Status.Conditions, v1.ConditionDegraded)
	if c != nil && c.Status == metav1.ConditionTrue && c.Message == msg && c.ObservedGeneration == in.Generation {
		return nil
	}
	in.Status.Message = msg
	if in.Status.Phase == "" {
		in.Status.Phase = v1.PhasePending
	}
	r.setConditions(in, false, false, reason, msg)
	r.event(in, corev1.EventTypeWarning, reason, msg)
	return r.writeStatus(ctx, in)
}

// event queues an Event for the Installation; writeStatus sends the queued
// Events once the status that records them is written, and drops them if
// the write fails (the pass is redone and queues them again), so a step's
// Events appear once however often its pass is retried.
func (r *Reconciler) event(in *v1.Installation, kind, reason, msg string) {
	r.pending = append(r.pending, pendingEvent{kind, reason, msg})
}

type pendingEvent struct{ kind, reason, msg string }

func (r *Reconciler) writeStatus(ctx context.Context, in *v1.Installation) error {
	pending := r.pending
	r.pending = nil
	phaseGauge.Reset()
	phaseGauge.WithLabelValues(string(in.Status.Phase)).Set(1)
	if err := r.Client.Status().Update(ctx, in); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("write status of installation %s (retried): %w", in.Name, err)
		}
		return fmt.Errorf("write status of installation %s: %w", in.Name, err)
	}
	for _, e := range pending {
		r.Recorder.Eventf(in, e.kind, e.reason, "%s", e.msg)
	}
	return nil
}

func (r *Reconciler) nodeTimeout(in *v1.Installation) time.Duration {
	if in.Spec.NodeTimeout != nil && in.Spec.NodeTimeout.Duration > 0 {
		return in.Spec.NodeTimeout.Duration
	}
	return defaultNodeTimeout
}
