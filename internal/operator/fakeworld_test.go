package operator

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
	"github.com/quantyroot/quantykube/internal/operator/hostrun"
)

// fakeHosts stands in for kubelet and the hosts (there is no kubelet in the
// reconciler tests, only a real API server): it finishes host pods with the
// result a host would give and flips a node's runtime when its install
// runs, and force-deletes evicted pods.
type fakeHosts struct {
	c client.Client
	// installed[subject/node] says whether the subject stands installed.
	installed map[string]bool
	// rollBack makes runtime installs on these nodes roll back.
	rollBack map[string]bool
	// silent makes host pods on these nodes never finish (a hung node).
	silent map[string]bool
	// die makes run pods on these nodes die without a result (evicted, the
	// node rebooting): the host's state stays unknown to the operator.
	die map[string]bool
	// refuse makes a node's preflight refuse with this reason.
	refuse map[string]string
	// pods counts host pods seen, by name.
	pods map[string]int
	// ha lists the HA node steps run, in order, as "OP STEP/NODE".
	ha []string
	// failHA makes the HA node step STEP/NODE roll back once, with this
	// reason.
	failHA map[string]string
}

func newFakeHosts(c client.Client) *fakeHosts {
	return &fakeHosts{c: c, installed: map[string]bool{}, rollBack: map[string]bool{}, silent: map[string]bool{}, die: map[string]bool{}, refuse: map[string]string{}, pods: map[string]int{}, failHA: map[string]string{}}
}

func (f *fakeHosts) tick(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var pods corev1.PodList
	if err := f.c.List(ctx, &pods); err != nil {
		t.Fatalf("list pods: %v", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			if err := f.c.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
				t.Fatalf("force-delete pod %s: %v", p.Name, err)
			}
			continue
		}
		if p.Namespace != Namespace || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		f.pods[p.Name]++
		if f.silent[p.Spec.NodeName] && !hasArg(p, "--preflight") {
			continue
		}
		if f.die[p.Spec.NodeName] && !hasArg(p, "--preflight") && !hasArg(p, "--check") {
			f.kill(t, p)
			continue
		}
		f.finish(t, p)
	}
}

func hasArg(p *corev1.Pod, arg string) bool {
	for _, a := range p.Spec.Containers[0].Args {
		if a == arg {
			return true
		}
	}
	return false
}

// argValue is the value of the host pod's argument that starts with prefix
// ("--ha="), or "".
func argValue(p *corev1.Pod, prefix string) string {
	for _, a := range p.Spec.Containers[0].Args {
		if strings.HasPrefix(a, prefix) {
			return strings.TrimPrefix(a, prefix)
		}
	}
	return ""
}

// finish plays the host side of one host pod.
func (f *fakeHosts) finish(t *testing.T, p *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	subject, op, node := v1.Subject(p.Labels[LabelSubject]), v1.Operation(p.Labels[LabelOp]), p.Spec.NodeName
	key := string(subject) + "/" + node
	check := hasArg(p, "--check")
	install := op == v1.OperationInstall
	res := hostrun.Result{Subject: subject, Op: op, State: hostrun.StateDone}
	step := argValue(p, "--ha=")
	switch {
	case step != "" && f.failHA[step+"/"+node] != "":
		res.State, res.Detail = hostrun.StateRolledBack, f.failHA[step+"/"+node]
		delete(f.failHA, step+"/"+node)
	case step != "":
		f.ha = append(f.ha, string(op)+" "+step+"/"+node)
	case hasArg(p, "--preflight"):
		if why := f.refuse[node]; why != "" {
			res.State, res.Detail = hostrun.StateRefused, why
		}
	case subject == v1.SubjectRuntime && install && f.rollBack[node]:
		res.State, res.Detail = hostrun.StateStarted, ""
		if check {
			res.State, res.Detail = hostrun.StateRolledBack, "start-runtime: injected fault"
		}
	case check:
		if f.installed[key] != install {
			res.State = hostrun.StateNone
		}
	default:
		f.installed[key] = install
		if subject == v1.SubjectStore {
			res.Detail = "API-server downtime: 6.4s"
		} else {
			res.State = hostrun.StateStarted
			f.setRuntime(t, node, install)
		}
	}
	phase := corev1.PodSucceeded
	if res.State == hostrun.StateRolledBack {
		phase = corev1.PodFailed
	}
	p.Status.Phase = phase
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name:  "host",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: res.String(), ExitCode: map[bool]int32{true: 0, false: 1}[phase == corev1.PodSucceeded]}},
	}}
	if err := f.c.Status().Update(ctx, p); err != nil {
		t.Fatalf("finish host pod %s: %v", p.Name, err)
	}
}

// kill ends a host pod as an eviction does: Failed, without a result.
func (f *fakeHosts) kill(t *testing.T, p *corev1.Pod) {
	t.Helper()
	p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "injected: the pod died"
	if err := f.c.Status().Update(context.Background(), p); err != nil {
		t.Fatalf("kill host pod %s: %v", p.Name, err)
	}
}

func (f *fakeHosts) setRuntime(t *testing.T, node string, qk bool) {
	t.Helper()
	rt := "containerd://1.6.20"
	if qk {
		rt = "quantykube://0.1.0"
	}
	var n corev1.Node
	if err := f.c.Get(context.Background(), types.NamespacedName{Name: node}, &n); err != nil {
		t.Fatal(err)
	}
	n.Status.NodeInfo.ContainerRuntimeVersion = rt
	if err := f.c.Status().Update(context.Background(), &n); err != nil {
		t.Fatalf("set runtime of %s: %v", node, err)
	}
}

// world is one test's cluster content.
type world struct {
	api   *testAPI
	hosts *fakeHosts
	kube  kubernetes.Interface
	// events are the Events every pass sent, as "TYPE REASON MESSAGE".
	events []string
}

func newWorld(t *testing.T, api *testAPI, kubeadm bool, controlPlanes []string, workers []string) *world {
	t.Helper()
	c := api.Client
	resetWorld(t, c)
	if kubeadm {
		mustCreate(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config"}})
	}
	for _, name := range controlPlanes {
		addNode(t, c, name, map[string]string{ControlPlaneLabel: ""})
	}
	for _, name := range workers {
		addNode(t, c, name, map[string]string{v1.RuntimeLabel: v1.RuntimeLabelValue})
		for i, vol := range []bool{false, true, false} {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: "default", Name: name + "-app-" + string(rune('a'+i)),
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app", UID: types.UID("00000000-0000-0000-0000-00000000000" + string(rune('1'+i))), Controller: ptrTrue()}},
				},
				Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			}
			if vol {
				p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			}
			mustCreate(t, c, p)
		}
	}
	kube, err := kubernetes.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &world{api: api, hosts: newFakeHosts(c), kube: kube}
}

func ptrTrue() *bool { b := true; return &b }

// dropEmptyDir replaces each workload pod with an emptyDir volume (a
// worker's -app-b) by one without it, named -plain: for tests of the
// operator's default Installation (EnsureInstallation), whose drain refuses
// emptyDir data as kubectl drain does by default.
func (w *world) dropEmptyDir(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	c := w.api.Client
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.EmptyDir != nil }) {
			continue
		}
		if err := c.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
			t.Fatalf("delete pod %s: %v", p.Name, err)
		}
		plain := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name + "-plain", OwnerReferences: p.OwnerReferences},
			Spec:       corev1.PodSpec{NodeName: p.Spec.NodeName, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		mustCreate(t, c, plain)
	}
}

func addNode(t *testing.T, c client.Client, name string, labels map[string]string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	mustCreate(t, c, n)
	n.Status = corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}},
		NodeInfo:   corev1.NodeSystemInfo{ContainerRuntimeVersion: "containerd://1.6.20"},
	}
	if err := c.Status().Update(context.Background(), n); err != nil {
		t.Fatalf("set status of node %s: %v", name, err)
	}
}

func mustCreate(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), o); err != nil {
		t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

// resetTimeout bounds the removal of what an earlier subtest left.
const resetTimeout = 20 * time.Second

// resetWorld removes what an earlier subtest left: the Installation, nodes,
// pods, kubeadm-config.
func resetWorld(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	for _, del := range []func() error{
		func() error { return c.DeleteAllOf(ctx, &v1.Installation{}) },
		func() error { return c.DeleteAllOf(ctx, &corev1.Node{}) },
		func() error {
			return c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("default"), client.GracePeriodSeconds(0))
		},
		func() error {
			return c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(Namespace), client.GracePeriodSeconds(0))
		},
		func() error {
			return c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config"}})
		},
	} {
		if err := del(); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("reset: %v", err)
		}
	}
	left := "nothing listed yet"
	err := wait.PollUntilContextTimeout(ctx, apiPoll, resetTimeout, true, func(ctx context.Context) (bool, error) {
		var l v1.InstallationList
		var nl corev1.NodeList
		var pl corev1.PodList
		for _, list := range []client.ObjectList{&l, &nl} {
			if err := c.List(ctx, list); err != nil {
				left = err.Error()
				return false, nil
			}
		}
		if err := c.List(ctx, &pl, client.InNamespace("default")); err != nil {
			left = err.Error()
			return false, nil
		}
		left = fmt.Sprintf("%d installations, %d nodes, %d pods remain", len(l.Items), len(nl.Items), len(pl.Items))
		return len(l.Items)+len(nl.Items)+len(pl.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("reset after %v: %s", resetTimeout, left)
	}
	// The namespace stays from an earlier subtest, and so do the default
	// service accounts (made here, as kube-controller-manager's token
	// controller would: there is none).
	mustCreateOrExists(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}})
	for _, n := range []string{"default", Namespace} {
		mustCreateOrExists(t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "default"}})
	}
}

func mustCreateOrExists(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

// pass runs one reconcile pass with a fresh Reconciler (as if the operator
// had been restarted before it), then lets the hosts act.
func (w *world) pass(t *testing.T) ctrl.Result {
	t.Helper()
	rec := record.NewFakeRecorder(100)
	r := &Reconciler{
		Client: w.api.Client, Kube: w.kube, Image: "quantykube.local/quantykube:dev",
		Recorder: rec, DrainPass: 2 * time.Second, CheckGrace: time.Nanosecond,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: v1.Name}})
	if err != nil {
		t.Logf("pass: %v", err)
	}
	for len(rec.Events) > 0 {
		w.events = append(w.events, <-rec.Events)
	}
	w.hosts.tick(t)
	return res
}

func (w *world) installation(t *testing.T) *v1.Installation {
	t.Helper()
	in := &v1.Installation{}
	if err := w.api.Client.Get(context.Background(), types.NamespacedName{Name: v1.Name}, in); err != nil {
		t.Fatalf("get installation: %v", err)
	}
	return in
}

// runUntil runs passes until the Installation's phase is one of want (and
// its step is idle), recording every (step, node) it went through.
func (w *world) runUntil(t *testing.T, max int, want ...v1.Phase) ([]string, *v1.Installation) {
	t.Helper()
	var steps []string
	for i := 0; i < max; i++ {
		w.pass(t)
		in := w.installation(t)
		if s := string(in.Status.Step) + "@" + in.Status.Node; in.Status.Step != "" && in.Status.Step != v1.StepDone && (len(steps) == 0 || steps[len(steps)-1] != s) {
			steps = append(steps, s)
		}
		for _, p := range want {
			if in.Status.Phase == p && (in.Status.Step == v1.StepDone || in.Status.Step == "") {
				return steps, in
			}
		}
	}
	in := w.installation(t)
	t.Fatalf("after %d passes phase %s step %s node %s (%s); steps %v", max, in.Status.Phase, in.Status.Step, in.Status.Node, in.Status.Message, steps)
	return nil, nil
}

// Pacing of passes that must be spread in real time (a node's deadline has
// to pass): passPace between passes, and a deadline noticed within
// deadlineSlack of its passing.
const (
	passPace      = 250 * time.Millisecond
	deadlineSlack = 12 * time.Second
)

// passUntil runs a pass every pace until done(Installation) holds, and
// returns the Installation; it fails the test after timeout, saying what it
// waited for.
func (w *world) passUntil(t *testing.T, pace, timeout time.Duration, what string, done func(*v1.Installation) bool) *v1.Installation {
	t.Helper()
	var in *v1.Installation
	err := wait.PollUntilContextTimeout(context.Background(), pace, timeout, true, func(context.Context) (bool, error) {
		w.pass(t)
		in = w.installation(t)
		return done(in), nil
	})
	if err != nil {
		t.Fatalf("not %s after %v: phase %s step %s node %s (%s)", what, timeout, in.Status.Phase, in.Status.Step, in.Status.Node, in.Status.Message)
	}
	return in
}

// testWriter sends the reconciler's log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
