package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/internal/version"
)

// Namespace is where the operator and its host pods live.
const Namespace = "quantykube-system"

// Pass intervals: a step in progress is looked at again after stepPoll; a new
// step starts stepGap after the previous one was recorded.
const (
	stepPoll = 3 * time.Second
	stepGap  = time.Second
)

// Defaults of the Reconciler's tunables, of spec.nodeTimeout and of
// spec.storeTimeout.
const (
	defaultNodeTimeout  = 10 * time.Minute
	defaultStoreTimeout = 15 * time.Minute
	defaultDrainPass    = 20 * time.Second
	defaultCheckGrace   = 2 * time.Minute
	defaultRoomWait     = 3 * time.Minute
)

// Reconciler moves the cluster as the Installation asks. Its fields are set
// before the first pass and only read by passes; what one pass computes
// lives in that pass (see pass).
type Reconciler struct {
	Client client.Client
	// APIReader reads what the operator must not cache: the Installation
	// at the start of each pass (always the latest status), the step's host
	// pod, the nodes a step decides on (cordoned before us, Ready on which
	// runtime, where else the operator could run) — the informers lag after
	// an API-server restart, each in its own back-off, so a node's cached
	// copy can be tens of seconds older than an Installation event — and
	// kube-system's ConfigMaps (its RBAC allows get, not list/watch);
	// default Client.
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
	// RoomWait: while the operator runs on the node to move and every other
	// node that could take it is only not Ready (a kubelet's lease lapsed
	// across the API server's restart in the store's move), the preflight
	// waits this long from the step's start for one to turn Ready before it
	// refuses (default 3 min).
	RoomWait time.Duration
	// PodName and PodNamespace name the operator's own pod (downward API),
	// so it never drains the node it runs on with nowhere to go; empty
	// outside a pod.
	PodName, PodNamespace string
	// Now is the clock (tests).
	Now func() time.Time
}

// outcome is what acting on a step in one pass found.
type outcome struct {
	done     bool   // the step ended well
	failed   error  // the step failed for good
	progress string // one line for status.message while it runs
	detail   string // measured impact, for the step's Event
}

// Reconcile runs one pass: it reads the Installation past the cache (a pass
// right after our own status write would otherwise act on the step before
// it), decides and acts on at most one step, and records what it found in
// one status write, the only one of the pass, which sends the pass's Events.
// That write also names the operator's build (status.operator), so an
// operator's first pass records a new build even when no step is due.
// A pass that meets a transient error records nothing and is retried.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.defaults()
	in := &v1.Installation{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, in); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	read := in.Status.DeepCopy()
	adoptOlderStatus(in)
	p := &pass{in: in}
	res, err := r.decide(ctx, p)
	var again retryError
	if errors.As(err, &again) {
		r.Log.Warn("step pass, retried", "step", read.Step, "node", read.Node, "err", again.err)
		return ctrl.Result{RequeueAfter: stepPoll}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	in.Status.Operator = r.build()
	return res, r.record(ctx, p, read)
}

// build is this operator's build as status.operator records it.
func (r *Reconciler) build() *v1.OperatorStatus {
	return &v1.OperatorStatus{Version: version.Version, Commit: version.Commit, Image: r.Image}
}

// decide computes the pass's status in p.in.Status: it refuses an
// Installation of another name, starts a run when no step is recorded, and
// otherwise acts on the recorded step.
func (r *Reconciler) decide(ctx context.Context, p *pass) (ctrl.Result, error) {
	in := p.in
	if in.Name != v1.Name {
		r.refuse(p, v1.ReasonNotTheInstallation,
			fmt.Sprintf("only the Installation named %q is acted on; delete %q and edit %q instead", v1.Name, in.Name, v1.Name))
		return ctrl.Result{}, nil
	}
	if st := &in.Status; st.Step == "" || st.Step == v1.StepDone {
		return r.startRun(ctx, p)
	}
	return r.runStep(ctx, p)
}

func (r *Reconciler) defaults() {
	if r.Namespace == "" {
		r.Namespace = Namespace
	}
	if r.DrainPass == 0 {
		r.DrainPass = defaultDrainPass
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.CheckGrace == 0 {
		r.CheckGrace = defaultCheckGrace
	}
	if r.RoomWait == 0 {
		r.RoomWait = defaultRoomWait
	}
	if r.APIReader == nil {
		r.APIReader = r.Client
	}
	if r.Log == nil {
		r.Log = slog.Default()
	}
}
