package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/quantyroot/quantykube/test/harness"
)

// writerHot is how many ConfigMaps the writer updates in turn (between its
// creates of new ones).
const writerHot = 20

// writerInterval is the writer's pace: one create or update, then this pause.
const writerInterval = 50 * time.Millisecond

// writerCallTimeout bounds one write: past it the write's outcome is
// unknown (it may still land), and the writer goes on with the next.
const writerCallTimeout = 5 * time.Second

// ack is one acknowledged write: the object and the resourceVersion its
// create or update was answered with, and when the answer came.
type ack struct {
	name string
	rv   int64
	at   time.Time
}

// writer creates and updates ConfigMaps in its namespace through the load
// balancer, one request at a time, and records every acknowledged write.
//
// Invariants: acks are in the order they were answered, and since each
// request is sent only after the previous one was answered, their
// resourceVersions must increase strictly (a lower one is a write ordered
// before one already acknowledged: a revision went backwards). An object
// whose write failed without an answer is "unsure" from then on: that
// write may have landed (even later), so its final resourceVersion may be
// above its last acknowledged one, never below. Every other object must end
// with exactly the resourceVersion of its last acknowledged write.
type writer struct {
	cs kubernetes.Interface
	ns string

	mu       sync.Mutex
	acks     []ack
	last     map[string]int64 // name → the resourceVersion of its last acknowledged write
	unsure   map[string]bool  // names with a write of unknown outcome
	failed   int
	firstErr string
	stop     context.CancelFunc
	done     sync.WaitGroup
}

// startWriter makes the hot ConfigMaps and starts writing until stop.
func startWriter(t *testing.T, cs kubernetes.Interface, ns string) *writer {
	t.Helper()
	w := &writer{cs: cs, ns: ns, last: map[string]int64{}, unsure: map[string]bool{}}
	setupCtx, cancelSetup := context.WithTimeout(context.Background(), time.Minute)
	defer cancelSetup()
	for i := 0; i < writerHot; i++ {
		if err := w.create(setupCtx, fmt.Sprintf("hot-%02d", i), 0); err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	w.done.Add(1)
	go w.run(ctx)
	return w
}

func (w *writer) run(ctx context.Context) {
	defer w.done.Done()
	for i := 1; ctx.Err() == nil; i++ {
		var err error
		if i%2 == 0 {
			err = w.update(fmt.Sprintf("hot-%02d", (i/2)%writerHot), i)
		} else {
			err = w.create(ctx, fmt.Sprintf("w-%06d", i), i)
		}
		if err != nil {
			w.mu.Lock()
			if w.failed++; w.firstErr == "" {
				w.firstErr = err.Error()
			}
			w.mu.Unlock()
		}
		time.Sleep(writerInterval)
	}
}

// create makes ConfigMap name, retrying until it is acknowledged (or ctx
// ends): an AlreadyExists means an earlier try landed unanswered, and the
// object, never updated, then carries that create's resourceVersion.
func (w *writer) create(ctx context.Context, name string, seq int) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns}, Data: map[string]string{"seq": strconv.Itoa(seq)}}
	var lastErr error
	for try := 0; ctx.Err() == nil || try == 0; try++ {
		cctx, cancel := context.WithTimeout(context.Background(), writerCallTimeout)
		got, err := w.cs.CoreV1().ConfigMaps(w.ns).Create(cctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) && try > 0 {
			got, err = w.cs.CoreV1().ConfigMaps(w.ns).Get(cctx, name, metav1.GetOptions{})
		}
		cancel()
		if err == nil {
			return w.acked(name, got.ResourceVersion)
		}
		lastErr = fmt.Errorf("create %s/%s: %w", w.ns, name, err)
		time.Sleep(100 * time.Millisecond)
	}
	return lastErr
}

// update writes seq into ConfigMap name once (unconditionally); without an
// answer the object becomes unsure.
func (w *writer) update(name string, seq int) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns}, Data: map[string]string{"seq": strconv.Itoa(seq)}}
	cctx, cancel := context.WithTimeout(context.Background(), writerCallTimeout)
	defer cancel()
	got, err := w.cs.CoreV1().ConfigMaps(w.ns).Update(cctx, cm, metav1.UpdateOptions{})
	if err != nil {
		w.mu.Lock()
		w.unsure[name] = true
		w.mu.Unlock()
		return fmt.Errorf("update %s/%s: %w", w.ns, name, err)
	}
	return w.acked(name, got.ResourceVersion)
}

func (w *writer) acked(name, rv string) error {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return fmt.Errorf("%s answered with resourceVersion %q: %w", name, rv, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.acks = append(w.acks, ack{name: name, rv: n, at: time.Now()})
	w.last[name] = n
	return nil
}

// Stop ends the writing (a write in flight is finished first).
func (w *writer) Stop() {
	w.stop()
	w.done.Wait()
}

// lastAck is the newest acknowledged resourceVersion (0 before any).
func (w *writer) lastAck() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.acks) == 0 {
		return 0
	}
	return w.acks[len(w.acks)-1].rv
}

// longestGap is the longest time without an acknowledged write within
// [from, to] (the window's edges count as acknowledgements).
func (w *writer) longestGap(from, to time.Time) (gap time.Duration, end time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	prev := from
	for _, a := range w.acks {
		if a.at.Before(from) {
			continue
		}
		if a.at.After(to) {
			break
		}
		if d := a.at.Sub(prev); d > gap {
			gap, end = d, a.at
		}
		prev = a.at
	}
	if d := to.Sub(prev); d > gap {
		gap, end = d, to
	}
	return gap, end
}

// check holds the writer to its invariants against what the cluster holds
// now (one quorum list of its namespace through the load balancer) and
// returns the number of acknowledged writes and of objects checked.
func (w *writer) check(t *testing.T) (acks, objects int) {
	t.Helper()
	var l *corev1.ConfigMapList
	err := harness.Retry(func() (err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err = w.cs.CoreV1().ConfigMaps(w.ns).List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("list the writer's ConfigMaps: %v", err)
	}
	have := map[string]int64{}
	for _, o := range l.Items {
		have[o.Name], _ = strconv.ParseInt(o.ResourceVersion, 10, 64)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var backwards []string
	for i := 1; i < len(w.acks); i++ {
		if a, b := w.acks[i-1], w.acks[i]; b.rv <= a.rv {
			backwards = append(backwards, fmt.Sprintf("%s at %d acknowledged after %s at %d", b.name, b.rv, a.name, a.rv))
		}
	}
	if len(backwards) > 0 {
		t.Errorf("writer: %d acknowledged writes went backwards, e.g. %s", len(backwards), backwards[0])
	}
	var lost []string
	for name, rv := range w.last {
		got, ok := have[name]
		switch {
		case !ok:
			lost = append(lost, fmt.Sprintf("%s (acknowledged at %d) is gone", name, rv))
		case w.unsure[name] && got < rv, !w.unsure[name] && got != rv:
			lost = append(lost, fmt.Sprintf("%s is at %d, its last acknowledged write at %d (unsure: %v)", name, got, rv, w.unsure[name]))
		}
	}
	sort.Strings(lost)
	if len(lost) > 0 {
		t.Errorf("writer: %d of %d objects lost an acknowledged write, e.g. %s", len(lost), len(w.last), lost[0])
	}
	return len(w.acks), len(w.last)
}
