package storemove

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/quantyroot/quantykube/internal/install"
)

// leaderLeases are the control plane's leader-elected components, by the
// name of their Lease in kube-system. While one leads it renews its Lease
// every retry period (2 s by default); when an API-server restart outlasts
// its renew deadline (10 s) it exits, kubelet restarts it with back-off,
// and the new one leads only once the old Lease expired (15 s). Until then
// the cluster does not act on changes: no replacement pods, no scheduling.
var leaderLeases = []string{"kube-controller-manager", "kube-scheduler"}

const (
	// leadersPatience bounds the wait for the leaders after the API server
	// returned: a Lease's expiry (15 s), kubelet's restart back-off after a
	// lost lease or two (10–40 s) and a slow start. Past it the move is done
	// all the same (the API server serves, the leaders return once
	// kubelet's back-off, which grows to 5 minutes, lets them) and says so:
	// measured, waiting out a 5-minute back-off made one move 335 s.
	leadersPatience = 60 * time.Second
	// staleLease: a Lease not renewed for this long was not being renewed
	// before the move either (leader election off, the component stopped
	// on purpose); it is not waited for.
	staleLease = 10 * time.Minute
	// leadersPoll is how often the Leases are read while waiting.
	leadersPoll = 250 * time.Millisecond
)

// leadersDo is the last step of every plan that restarts the API server:
// the move is done when the cluster acts again, not only when the API
// server answers.
func (m *Mover) leadersDo(ctx context.Context) error {
	cs, err := m.Paths.Kube()
	if err != nil {
		return err
	}
	err = waitLeaders(ctx, cs, m.Out, leadersPatience)
	var late *leadersLateError
	if errors.As(err, &late) {
		fmt.Fprintf(m.Out, "  warning: %v\n", err)
		return nil
	}
	return err
}

// leadersLateError: a leader has not renewed its Lease within the wait.
type leadersLateError struct{ msg string }

func (e *leadersLateError) Error() string { return e.msg }

// waitLeaders waits until every Lease of leaderLeases that was being
// renewed has been written again since this call began. The API server
// was down until just before: a write to a Lease seen now was made through
// the API server as it is now (on its new datastore), by a leader that
// runs — the old one kept its lead, or its successor took over. No clock
// is compared across machines: only the Lease's resourceVersion.
func waitLeaders(ctx context.Context, cs kubernetes.Interface, out io.Writer, timeout time.Duration) error {
	start := time.Now()
	first := map[string]string{} // Lease -> the resourceVersion first read
	waiting := map[string]bool{}
	for _, name := range leaderLeases {
		waiting[name] = true
	}
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, leadersPoll, timeout, true, func(ctx context.Context) (bool, error) {
		for _, name := range leaderLeases {
			if !waiting[name] {
				continue
			}
			l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				fmt.Fprintf(out, "  %s has no leader Lease in kube-system (leader election off): not waited for\n", name)
				delete(waiting, name)
				continue
			case err != nil:
				lastErr = err // the API server just came back: retried
				continue
			}
			rv, seen := first[name]
			if !seen {
				first[name] = l.ResourceVersion
				if l.Spec.RenewTime != nil && time.Since(l.Spec.RenewTime.Time) > staleLease {
					fmt.Fprintf(out, "  %s's leader Lease was last renewed %v ago, before the move: not waited for\n",
						name, time.Since(l.Spec.RenewTime.Time).Round(time.Second))
					delete(waiting, name)
				}
				continue
			}
			if l.ResourceVersion != rv {
				holder := ""
				if l.Spec.HolderIdentity != nil {
					holder = *l.Spec.HolderIdentity
				}
				fmt.Fprintf(out, "  %s leads again (%s renewed its Lease %v after the API server answered)\n",
					name, holder, time.Since(start).Round(100*time.Millisecond))
				delete(waiting, name)
			}
		}
		return len(waiting) == 0, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		for _, name := range leaderLeases {
			if waiting[name] {
				cause := ""
				if lastErr != nil {
					cause = fmt.Sprintf(" (last error: %v)", lastErr)
				}
				return &leadersLateError{fmt.Sprintf("%s has not renewed its Lease kube-system/%s within %v of the API server answering%s; "+
					"it leads again once kubelet restarts it (its restart back-off after a lost lease grows to 5 minutes): "+
					"see `crictl ps -a --name %s` and its logs on the node that runs it; rerun the command to wait again",
					name, name, timeout, cause, name)}
			}
		}
	}
	return err
}

// leadersStep waits for the leaders; it changes nothing, so it has no Undo.
func (m *Mover) leadersStep() install.Step {
	return install.Step{Name: "leaders", Impact: "none: waits until kube-controller-manager and kube-scheduler renew their leader Leases again (each exits when an API-server restart outlasts its renew deadline; kubelet restarts it)",
		Do: m.leadersDo}
}
