package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/internal/operator/hostrun"
)

// Labels on every host pod: LabelManagedBy=ManagedBy, and the host
// operation's subject (v1.Subject) and operation (v1.Operation).
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "quantykube-operator"
	LabelSubject   = "install.quantyroot.io/subject"
	LabelOp        = "install.quantyroot.io/op"
)

// hostPodDeadline bounds one host pod (activeDeadlineSeconds).
const hostPodDeadline = int64(15 * 60)

// hostJob is one host pod: run (or, with check, only read the journal of)
// op on subject on node.
type hostJob struct {
	Target hostrun.Target
	Node   string
	Check  bool // only report the journal; start nothing
	// Preflight runs only the install's checks that need no drained node.
	Preflight bool
	Detach    bool // start the unit and exit, do not follow it
	// Since: host runs started before it belong to earlier attempts (the
	// step's start for the store, the node's start for node steps).
	Since *metav1.Time
}

func (j hostJob) name(attempt int32) string {
	kind := "run"
	switch {
	case j.Check:
		kind = "check"
	case j.Preflight:
		kind = "preflight"
	}
	if j.Target.HA != "" {
		// Each HA step has its own pods: a finished step's pod that is
		// still being deleted is never read as the next step's.
		kind = "ha-" + j.Target.HA
	}
	return strings.ToLower(fmt.Sprintf("qk-%s-%s-%s-%s-%d", j.Target.Op, j.Target.Subject, kind, j.Node, attempt))
}

// hostPod is the pod spec: privileged, hostPID/hostNetwork/hostIPC, pinned to
// the node, tolerating every taint, never restarted, with a deadline. It runs
// `quantykube operator host` (hostrun), which reaches the host through
// /proc/1/root.
func (r *Reconciler) hostPod(in *v1.Installation, j hostJob, attempt int32) (*corev1.Pod, error) {
	args := []string{"operator", "host", string(j.Target.Op), string(j.Target.Subject)}
	if j.Since != nil {
		args = append(args, "--since="+j.Since.UTC().Format(time.RFC3339))
	}
	if j.Target.HA != "" {
		args = append(args, "--ha="+j.Target.HA)
	}
	if j.Check {
		args = append(args, "--check")
	}
	if j.Preflight {
		args = append(args, "--preflight")
	}
	if j.Detach {
		args = append(args, "--detach")
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: j.name(attempt), Namespace: r.Namespace,
			Labels: map[string]string{
				LabelManagedBy: ManagedBy,
				LabelSubject:   string(j.Target.Subject),
				LabelOp:        string(j.Target.Op),
			},
		},
		Spec: corev1.PodSpec{
			NodeName:                      j.Node,
			RestartPolicy:                 corev1.RestartPolicyNever,
			HostPID:                       true,
			HostNetwork:                   true,
			HostIPC:                       true,
			ActiveDeadlineSeconds:         ptr.To(hostPodDeadline),
			TerminationGracePeriodSeconds: ptr.To(int64(5)),
			PriorityClassName:             "system-node-critical",
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{
				Name:                     "host",
				Image:                    r.Image,
				ImagePullPolicy:          corev1.PullIfNotPresent,
				Command:                  []string{"/usr/local/bin/quantykube"},
				Args:                     args,
				SecurityContext:          &corev1.SecurityContext{Privileged: ptr.To(true)},
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
		},
	}
	if err := controllerutil.SetOwnerReference(in, p, r.Client.Scheme()); err != nil {
		return nil, fmt.Errorf("own host pod %s: %w", p.Name, err)
	}
	return p, nil
}

// hostState is what a host pod says.
type hostState struct {
	exists   bool
	finished bool // Succeeded or Failed
	result   *hostrun.Result
	reason   string // why it failed without a result
}

// ensureHostPod creates the attempt's pod if it does not exist and reports
// its state.
func (r *Reconciler) ensureHostPod(ctx context.Context, in *v1.Installation, j hostJob, attempt int32) (hostState, error) {
	var p corev1.Pod
	// Past the cache: after the store step restarts the API server the
	// pod informer may lag for many seconds behind the pod.
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: j.name(attempt)}, &p)
	if apierrors.IsNotFound(err) {
		np, err := r.hostPod(in, j, attempt)
		if err != nil {
			return hostState{}, err
		}
		if err := r.Client.Create(ctx, np); err != nil && !apierrors.IsAlreadyExists(err) {
			return hostState{}, fmt.Errorf("create host pod %s: %w", np.Name, err)
		}
		r.Log.Info("host pod created", "pod", np.Name, "node", j.Node)
		return hostState{exists: true}, nil
	}
	if err != nil {
		return hostState{}, fmt.Errorf("get host pod %s: %w", j.name(attempt), err)
	}
	return readHostPod(&p), nil
}

func readHostPod(p *corev1.Pod) hostState {
	hs := hostState{exists: true}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff" || w.Reason == "InvalidImageName") {
			// It would wait for its deadline: count it as dead now.
			hs.finished = true
			hs.reason = fmt.Sprintf("image %s is not on node %s and cannot be pulled (%s); load it into the node's runtime", cs.Image, p.Spec.NodeName, w.Reason)
			return hs
		}
	}
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		return hs
	}
	hs.finished = true
	hs.reason = p.Status.Reason + " " + p.Status.Message
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			if res, err := hostrun.ParseResult(t.Message); err == nil {
				hs.result = &res
			} else {
				hs.reason = fmt.Sprintf("exit %d %s: %s", t.ExitCode, t.Reason, strings.TrimSpace(t.Message))
			}
		}
	}
	hs.reason = strings.TrimSpace(hs.reason)
	return hs
}

// deleteHostPod removes a finished host pod: none stays behind.
func (r *Reconciler) deleteHostPod(ctx context.Context, j hostJob, attempt int32) error {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: j.name(attempt)}}
	if err := r.Client.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete host pod %s: %w", p.Name, err)
	}
	return nil
}

// maxAttempts bounds host pods per step that died without a result.
const maxAttempts = 3

// deleteStepPods removes every host pod (they all belong to the step that
// just ended): no installer pod stays behind, whatever state it is in. It
// tries every pod and returns what failed.
func (r *Reconciler) deleteStepPods(ctx context.Context) error {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(r.Namespace), client.MatchingLabels{LabelManagedBy: ManagedBy}); err != nil {
		return fmt.Errorf("list host pods in %s: %w", r.Namespace, err)
	}
	var errs []error
	for i := range pods.Items {
		if err := r.Client.Delete(ctx, &pods.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete host pod %s: %w", pods.Items[i].Name, err))
		}
	}
	return errors.Join(errs...)
}

// deleteStepPodsAfter removes the host pods of t, which just ended (well,
// failed or timed out). A failure is logged with the step and the run goes
// on: the pods are owned by the Installation and hold no work (their host
// units run on the host, and a later host pod follows the journal, never
// reruns blindly); the log names what to delete by hand.
func (r *Reconciler) deleteStepPodsAfter(ctx context.Context, t task) {
	if err := r.deleteStepPods(ctx); err != nil {
		r.Log.Warn("host pods of an ended step left behind; delete them by hand", "step", t.Step, "node", t.Node,
			"selector", LabelManagedBy+"="+ManagedBy, "namespace", r.Namespace, "err", err)
	}
}
