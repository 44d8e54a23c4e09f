package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/quantyroot/quantykube/test/harness"
)

// haTraffic is every client the HA e2e keeps busy through the load
// balancer across the move and the undo: the harness's Prober (a read and
// a write every 100 ms), the writer, a watcher of the writer's ConfigMaps
// and a watcher of every Lease in the cluster (the kubelets', the
// controllers' and the API servers' own heartbeats, written through all
// three API servers).
type haTraffic struct {
	ns       string
	prober   *harness.Prober
	writer   *writer
	cms      *rvWatcher
	leases   *rvWatcher
	avail    harness.Availability
	finished bool
}

// startTraffic makes namespace ns and starts every client in it.
func (h *haCluster) startTraffic(t *testing.T, ns string) *haTraffic {
	t.Helper()
	ctx := context.Background()
	err := harness.Retry(func() error {
		_, err := h.CS.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	tr := &haTraffic{ns: ns}
	t.Cleanup(func() {
		tr.stop()
		_ = h.CS.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	tr.cms = configMapWatcher(h.ownClient(t), ns)
	tr.leases = leaseWatcher(h.ownClient(t))
	for _, w := range []*rvWatcher{tr.cms, tr.leases} {
		if err := w.start(); err != nil {
			t.Fatal(err)
		}
	}
	if tr.prober, err = harness.StartProber(ctx, h.CS, ns, "probe", harness.ProbeInterval, harness.ProbeTimeout); err != nil {
		t.Fatal(err)
	}
	tr.writer = startWriter(t, h.ownClient(t), ns)
	return tr
}

// catchUpTimeout bounds the wait for the watchers to see the writer's
// last acknowledged write before they stop.
const catchUpTimeout = time.Minute

// stop ends every client, the writer first, and the watchers once they
// have seen its last write (or catchUpTimeout passed: the check says what
// they missed). It is idempotent.
func (tr *haTraffic) stop() {
	if tr.finished {
		return
	}
	tr.finished = true
	tr.writer.Stop()
	last := tr.writer.lastAck()
	deadline := time.Now().Add(catchUpTimeout)
	for tr.cms.lastRV() < last && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	tr.cms.Stop()
	tr.leases.Stop()
	tr.avail = tr.prober.Stop()
}

func configMapWatcher(cs kubernetes.Interface, ns string) *rvWatcher {
	return &rvWatcher{
		what: "watch of the writer's ConfigMaps",
		list: func(ctx context.Context) (string, []metav1.Object, error) {
			l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return "", nil, fmt.Errorf("list ConfigMaps in %s: %w", ns, err)
			}
			items := make([]metav1.Object, len(l.Items))
			for i := range l.Items {
				items[i] = &l.Items[i]
			}
			return l.ResourceVersion, items, nil
		},
		watch: func(ctx context.Context, rv string) (watch.Interface, error) {
			return cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		},
	}
}

func leaseWatcher(cs kubernetes.Interface) *rvWatcher {
	return &rvWatcher{
		what: "watch of every Lease",
		list: func(ctx context.Context) (string, []metav1.Object, error) {
			l, err := cs.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return "", nil, fmt.Errorf("list Leases: %w", err)
			}
			items := make([]metav1.Object, len(l.Items))
			for i := range l.Items {
				items[i] = &l.Items[i]
			}
			return l.ResourceVersion, items, nil
		},
		watch: func(ctx context.Context, rv string) (watch.Interface, error) {
			return cs.CoordinationV1().Leases("").Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		},
	}
}

// check holds every client to its invariants (after stop) and logs the
// figures: no acknowledged write lost or reordered, no watch that went
// backwards, every acknowledged write seen by the ConfigMap watcher (or in
// one of its relists' spans), and reads never unanswered for longer than
// readGapLimit.
func (tr *haTraffic) check(t *testing.T) {
	t.Helper()
	tr.stop()
	acks, objects := tr.writer.check(t)
	tr.writer.mu.Lock()
	all := append([]ack(nil), tr.writer.acks...)
	failed, firstErr, unsure := tr.writer.failed, tr.writer.firstErr, len(tr.writer.unsure)
	tr.writer.mu.Unlock()
	t.Logf("figure: writer: %d acknowledged writes (creates and updates) kept with their resourceVersions over %d objects; %d writes failed without an answer (%d objects unsure)%s",
		acks, objects, failed, unsure, map[bool]string{true: ", first: " + firstErr}[firstErr != ""])
	for _, w := range []*rvWatcher{tr.cms, tr.leases} {
		t.Logf("figure: %s", w.summary())
		if len(w.backwards) > 0 {
			t.Errorf("%s: resourceVersion went backwards %d times, e.g. %s", w.what, len(w.backwards), w.backwards[0])
		}
	}
	missed, excused := tr.cms.missed(all)
	t.Logf("figure: %s saw %d of %d acknowledged writes (%d inside a relist's span)", tr.cms.what, len(all)-len(missed)-excused, len(all), excused)
	if len(missed) > 0 {
		t.Errorf("%s missed %d acknowledged writes, e.g. %s at %d", tr.cms.what, len(missed), missed[0].name, missed[0].rv)
	}
	a := tr.avail
	t.Logf("figure: availability through the load balancer, %v", a)
	if a.Reads.LongestGap > readGapLimit {
		t.Errorf("reads went unanswered for %v (ending %s), more than %v: at some moment no API server answered reads",
			a.Reads.LongestGap.Round(time.Millisecond), a.Reads.GapEnd.UTC().Format("15:04:05.000"), readGapLimit)
	}
}

// readGapLimit is the availability bound: at every moment at least one API
// server answers reads, so a client on the load balancer never waits this
// long (its own failover included) for a successful read.
const readGapLimit = 10 * time.Second
