package harness

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
)

// WriterHot is how many ConfigMaps the writer updates in turn (between its
// creates of new ones).
const WriterHot = 20

// writerInterval is the writer's pace: one create or update, then this pause.
const writerInterval = 50 * time.Millisecond

// writerCallTimeout bounds one write: past it the write's outcome is
// unknown (it may still land), and the writer goes on with the next.
const writerCallTimeout = 5 * time.Second

// Ack is one acknowledged write: the object and the resourceVersion its
// create or update was answered with, and when the answer came.
type Ack struct {
	Name string
	RV   int64
	At   time.Time
}

// version is what the writer knows an object holds: the resourceVersion
// and the sequence number of the write that made it (written into the
// object's data as "seq", unique per write).
type version struct {
	rv  int64
	seq int
}

// Writer creates and updates ConfigMaps in its namespace, one request at a
// time, and records every acknowledged write, as a controller does. Its
// updates are optimistic: each carries the resourceVersion the writer
// holds for the object, so the API refuses it (409 Conflict) if the object
// changed since — which, as the writer is the objects' only writer, means
// that either one of its own unanswered writes landed, or the object's
// resourceVersion changed without a write.
//
// Invariants, each a recorded violation (never retried away):
//   - acks are in the order they were answered, and since each request is
//     sent only after the previous one was answered, their resourceVersions
//     increase strictly;
//   - an object read back (after a Conflict, and at the end) holds either
//     the write the writer holds, at exactly its resourceVersion, or one of
//     its writes that went unanswered (a "ghost": it may land any time),
//     at a higher resourceVersion. Anything else is a resourceVersion that
//     changed without a write, went down below one a client held, or data
//     no write of the writer's had.
type Writer struct {
	cs kubernetes.Interface
	ns string

	mu       sync.Mutex
	seq      int
	acks     []Ack
	held     map[string]version
	ghosts   map[string]map[int]bool // name → seqs sent without an answer
	failed   int
	firstErr string
	wrong    []string // violations of the invariants
	stop     context.CancelFunc
	done     sync.WaitGroup
}

// StartWriter makes the hot ConfigMaps in ns (which must exist) and starts
// writing until Stop.
func StartWriter(t testing.TB, cs kubernetes.Interface, ns string) *Writer {
	t.Helper()
	w := &Writer{cs: cs, ns: ns, held: map[string]version{}, ghosts: map[string]map[int]bool{}}
	setupCtx, cancelSetup := context.WithTimeout(context.Background(), time.Minute)
	defer cancelSetup()
	for i := 0; i < WriterHot; i++ {
		if err := w.create(setupCtx, hotName(i)); err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	w.done.Add(1)
	go w.run(ctx)
	t.Cleanup(w.Stop)
	return w
}

func hotName(i int) string { return fmt.Sprintf("hot-%02d", i%WriterHot) }

func (w *Writer) run(ctx context.Context) {
	defer w.done.Done()
	for i := 1; ctx.Err() == nil; i++ {
		var err error
		if i%2 == 0 {
			err = w.update(hotName(i / 2))
		} else {
			err = w.create(ctx, fmt.Sprintf("w-%06d", i))
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

// next is the sequence number of a new write.
func (w *Writer) next() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	return w.seq
}

func (w *Writer) object(name string, seq int, rv int64) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns}, Data: map[string]string{"seq": strconv.Itoa(seq)}}
	if rv > 0 {
		cm.ResourceVersion = strconv.FormatInt(rv, 10)
	}
	return cm
}

// create makes ConfigMap name, retrying until it is acknowledged (or ctx
// ends): an AlreadyExists means an earlier try landed unanswered; the
// object is then read back and must hold that create.
func (w *Writer) create(ctx context.Context, name string) error {
	seq := w.next()
	var lastErr error
	for try := 0; ctx.Err() == nil || try == 0; try++ {
		cctx, cancel := context.WithTimeout(context.Background(), writerCallTimeout)
		got, err := w.cs.CoreV1().ConfigMaps(w.ns).Create(cctx, w.object(name, seq, 0), metav1.CreateOptions{})
		cancel()
		if err == nil {
			return w.acked(name, got.ResourceVersion, seq)
		}
		if apierrors.IsAlreadyExists(err) && try > 0 {
			return w.readBack(name)
		}
		w.ghost(name, seq)
		lastErr = fmt.Errorf("create %s/%s: %w", w.ns, name, err)
		time.Sleep(100 * time.Millisecond)
	}
	return lastErr
}

// update writes a new seq into ConfigMap name, on the condition that it is
// still at the resourceVersion the writer holds. A Conflict is answered by
// reading the object back (readBack holds it to the invariants); a write
// without an answer becomes a ghost.
func (w *Writer) update(name string) error {
	seq := w.next()
	w.mu.Lock()
	h := w.held[name]
	w.mu.Unlock()
	cctx, cancel := context.WithTimeout(context.Background(), writerCallTimeout)
	got, err := w.cs.CoreV1().ConfigMaps(w.ns).Update(cctx, w.object(name, seq, h.rv), metav1.UpdateOptions{})
	cancel()
	switch {
	case err == nil:
		return w.acked(name, got.ResourceVersion, seq)
	case apierrors.IsConflict(err):
		return w.readBack(name)
	default:
		w.ghost(name, seq)
		return fmt.Errorf("update %s/%s: %w", w.ns, name, err)
	}
}

// readBack reads name (a quorum read) and holds what it finds to the
// invariants; what it finds becomes what the writer holds.
func (w *Writer) readBack(name string) error {
	cctx, cancel := context.WithTimeout(context.Background(), writerCallTimeout)
	defer cancel()
	got, err := w.cs.CoreV1().ConfigMaps(w.ns).Get(cctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read %s/%s back: %w", w.ns, name, err)
	}
	v, err := versionOf(got)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.observe(name, v)
	return nil
}

func versionOf(cm *corev1.ConfigMap) (version, error) {
	rv, err := strconv.ParseInt(cm.ResourceVersion, 10, 64)
	if err != nil {
		return version{}, fmt.Errorf("%s has resourceVersion %q: %w", cm.Name, cm.ResourceVersion, err)
	}
	seq, err := strconv.Atoi(cm.Data["seq"])
	if err != nil {
		return version{}, fmt.Errorf("%s holds seq %q, which no write of the writer had", cm.Name, cm.Data["seq"])
	}
	return version{rv: rv, seq: seq}, nil
}

// observe holds a version of name read from the cluster to the invariants
// and makes it the one held. w.mu is held.
func (w *Writer) observe(name string, got version) {
	h, known := w.held[name]
	switch {
	case known && got.seq == h.seq && got.rv != h.rv:
		w.wrong = append(w.wrong, fmt.Sprintf("%s: resourceVersion %d, but the write it holds was acknowledged at %d (its resourceVersion changed without a write)", name, got.rv, h.rv))
	case known && got.seq == h.seq:
		// unchanged
	case w.ghosts[name][got.seq] && got.rv > h.rv:
		delete(w.ghosts[name], got.seq) // an unanswered write landed
	case w.ghosts[name][got.seq]:
		w.wrong = append(w.wrong, fmt.Sprintf("%s: an unanswered write landed at resourceVersion %d, not above %d, the one a client held", name, got.rv, h.rv))
	default:
		w.wrong = append(w.wrong, fmt.Sprintf("%s: holds seq %d at resourceVersion %d, which is neither the acknowledged write (seq %d at %d) nor an unanswered one", name, got.seq, got.rv, h.seq, h.rv))
	}
	w.held[name] = got
}

func (w *Writer) ghost(name string, seq int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ghosts[name] == nil {
		w.ghosts[name] = map[int]bool{}
	}
	w.ghosts[name][seq] = true
}

func (w *Writer) acked(name, rv string, seq int) error {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return fmt.Errorf("%s answered with resourceVersion %q: %w", name, rv, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.acks = append(w.acks, Ack{Name: name, RV: n, At: time.Now()})
	w.held[name] = version{rv: n, seq: seq}
	delete(w.ghosts[name], seq) // an earlier try of this create, answered now
	return nil
}

// Stop ends the writing (a write in flight is finished first). Idempotent.
func (w *Writer) Stop() {
	if w.stop != nil {
		w.stop()
	}
	w.done.Wait()
}

// LastAck is the newest acknowledged resourceVersion (0 before any).
func (w *Writer) LastAck() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.acks) == 0 {
		return 0
	}
	return w.acks[len(w.acks)-1].RV
}

// Acks is a copy of every acknowledged write, in the order answered.
func (w *Writer) Acks() []Ack {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Ack(nil), w.acks...)
}

// LongestGap is the longest time without an acknowledged write within
// [from, to] (the window's edges count as acknowledgements).
func (w *Writer) LongestGap(from, to time.Time) (gap time.Duration, end time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	prev := from
	for _, a := range w.acks {
		if a.At.Before(from) {
			continue
		}
		if a.At.After(to) {
			break
		}
		if d := a.At.Sub(prev); d > gap {
			gap, end = d, a.At
		}
		prev = a.At
	}
	if d := to.Sub(prev); d > gap {
		gap, end = d, to
	}
	return gap, end
}

// Check stops the writer and holds it to its invariants against what the
// cluster holds now (one quorum list of its namespace). It returns the
// resourceVersion of each of its objects as listed (for the watchers'
// checks) and logs the writer's figures.
func (w *Writer) Check(t testing.TB) map[string]int64 {
	t.Helper()
	w.Stop()
	var l *corev1.ConfigMapList
	err := Retry(func() (err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err = w.cs.CoreV1().ConfigMaps(w.ns).List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("list the writer's ConfigMaps: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	final := map[string]int64{}
	for i := range l.Items {
		name := l.Items[i].Name
		if _, ok := w.held[name]; !ok {
			continue // another client's, or a create never acknowledged
		}
		v, err := versionOf(&l.Items[i])
		if err != nil {
			w.wrong = append(w.wrong, err.Error())
			continue
		}
		final[name] = v.rv
		w.observe(name, v)
	}
	var backwards []string
	for i := 1; i < len(w.acks); i++ {
		if a, b := w.acks[i-1], w.acks[i]; b.RV <= a.RV {
			backwards = append(backwards, fmt.Sprintf("%s at %d acknowledged after %s at %d", b.Name, b.RV, a.Name, a.RV))
		}
	}
	if len(backwards) > 0 {
		t.Errorf("writer: %d acknowledged writes went backwards, e.g. %s", len(backwards), backwards[0])
	}
	var lost []string
	for name, h := range w.held {
		if _, ok := final[name]; !ok {
			lost = append(lost, fmt.Sprintf("%s (acknowledged at %d) is gone", name, h.rv))
		}
	}
	sort.Strings(lost)
	if len(lost) > 0 {
		t.Errorf("writer: %d of %d objects are gone, e.g. %s", len(lost), len(w.held), lost[0])
	}
	if len(w.wrong) > 0 {
		t.Errorf("writer: %d reads broke the invariants (acknowledged writes kept, no resourceVersion changed without a write or below one a client held), e.g. %s", len(w.wrong), w.wrong[0])
	}
	unsure := 0
	for _, g := range w.ghosts {
		unsure += len(g)
	}
	t.Logf("figure: writer: %d acknowledged writes (creates and optimistic updates) over %d objects, each kept with its resourceVersion; %d writes failed, %d of them never answered nor found landed%s",
		len(w.acks), len(w.held), w.failed, unsure, map[bool]string{true: ", first: " + w.firstErr}[w.firstErr != ""])
	return final
}
