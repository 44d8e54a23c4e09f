package harness

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// An RVWatcher is one client watching one resource for the whole move and
// undo, the way a controller's reflector
// does: a quorum list, then a watch from the list's resourceVersion with
// bookmarks; a watch that ends or fails is opened again from the last
// resourceVersion seen; only "410 Gone" (that history is no longer served:
// a restarted API server's watch cache begins at its current revision)
// makes it list again.
//
// Invariants checked (a violation is recorded, never papered over): every
// event's resourceVersion is above the one before it (a bookmark's is not
// below); a relist answers at or above the last resourceVersion seen.
// Each object version seen (an event, or an item of a relist) is kept, and
// each relist's span of resourceVersions (last seen, relist] is kept: the
// versions written inside it need not have been seen as events.
type RVWatcher struct {
	what  string
	list  func(ctx context.Context) (rv string, items []metav1.Object, err error)
	watch func(ctx context.Context, rv string) (watch.Interface, error)

	mu        sync.Mutex
	last      int64
	events    int
	seen      map[string]bool // "name@rv"
	relists   [][2]int64      // (from, to] spans
	reopened  int             // watches opened again after an end or an error
	errors    int
	firstErr  string
	backwards []string
	stop      context.CancelFunc
	done      sync.WaitGroup
}

// Start lists and starts watching; it returns once the first list
// succeeded, or its error after a minute.
func (w *RVWatcher) Start() error {
	w.seen = map[string]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	deadline := time.Now().Add(time.Minute)
	for {
		err := w.relist(ctx, true)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			return fmt.Errorf("%s: first list: %w", w.what, err)
		}
		time.Sleep(time.Second)
	}
	w.done.Add(1)
	go w.run(ctx)
	return nil
}

func (w *RVWatcher) run(ctx context.Context) {
	defer w.done.Done()
	for ctx.Err() == nil {
		gone := w.watchOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if gone {
			for ctx.Err() == nil && w.relist(ctx, false) != nil {
				time.Sleep(500 * time.Millisecond)
			}
			continue
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// watchOnce watches from the last resourceVersion until the watch ends;
// it reports whether that history is gone (a relist is due).
func (w *RVWatcher) watchOnce(ctx context.Context) (gone bool) {
	w.mu.Lock()
	from := strconv.FormatInt(w.last, 10)
	w.reopened++
	w.mu.Unlock()
	wi, err := w.watch(ctx, from)
	if ctx.Err() != nil {
		return false // stopped: what it says now is the stop's doing
	}
	if err != nil {
		w.fail(err)
		return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
	}
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		if ctx.Err() != nil {
			return false
		}
		if ev.Type == watch.Error {
			err := apierrors.FromObject(ev.Object)
			w.fail(err)
			return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
		}
		w.event(ev.Type, ev.Object)
	}
	return false
}

func (w *RVWatcher) event(typ watch.EventType, obj runtime.Object) {
	m, err := meta.Accessor(obj)
	if err != nil {
		w.fail(fmt.Errorf("a %s event of %T: %w", typ, obj, err))
		return
	}
	rv, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	if err != nil {
		w.fail(fmt.Errorf("a %s event of %s with resourceVersion %q", typ, m.GetName(), m.GetResourceVersion()))
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if typ == watch.Bookmark {
		if rv < w.last {
			w.backwards = append(w.backwards, fmt.Sprintf("a bookmark at %d after %d", rv, w.last))
		}
		w.last = max(w.last, rv)
		return
	}
	w.events++
	if rv <= w.last {
		w.backwards = append(w.backwards, fmt.Sprintf("%s %s at %d after %d", typ, m.GetName(), rv, w.last))
	}
	w.last = max(w.last, rv)
	w.seen[m.GetName()+"@"+m.GetResourceVersion()] = true
}

// relist lists again (quorum); the answer must not be below what was seen.
func (w *RVWatcher) relist(ctx context.Context, first bool) error {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rvs, items, err := w.list(lctx)
	if err != nil {
		if ctx.Err() == nil {
			w.fail(err)
		}
		return err
	}
	rv, err := strconv.ParseInt(rvs, 10, 64)
	if err != nil {
		return fmt.Errorf("%s: list answered at resourceVersion %q", w.what, rvs)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if rv < w.last {
		w.backwards = append(w.backwards, fmt.Sprintf("a relist at %d after %d", rv, w.last))
	}
	if !first {
		w.relists = append(w.relists, [2]int64{w.last, rv})
	}
	for _, o := range items {
		w.seen[o.GetName()+"@"+o.GetResourceVersion()] = true
	}
	w.last = max(w.last, rv)
	return nil
}

func (w *RVWatcher) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.errors++; w.firstErr == "" {
		w.firstErr = err.Error()
	}
}

// LastRV is the newest resourceVersion the watcher has seen.
func (w *RVWatcher) LastRV() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// Stop ends the watch. Idempotent.
func (w *RVWatcher) Stop() {
	if w.stop != nil {
		w.stop()
	}
	w.done.Wait()
}

// Backwards is every time the watch went backwards (a violation).
func (w *RVWatcher) Backwards() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.backwards...)
}

// What names the watch in messages.
func (w *RVWatcher) What() string { return w.what }

// Missed is the acknowledged writes the watcher saw neither as an event
// nor in a relist, leaving out those inside a relist's span (excused).
func (w *RVWatcher) Missed(acks []Ack) (missed []Ack, excused int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range acks {
		if w.seen[a.Name+"@"+strconv.FormatInt(a.RV, 10)] {
			continue
		}
		in := false
		for _, s := range w.relists {
			in = in || (a.RV > s[0] && a.RV <= s[1])
		}
		if in {
			excused++
			continue
		}
		missed = append(missed, a)
	}
	return missed, excused
}

// Summary is one line of what the watcher saw.
func (w *RVWatcher) Summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := fmt.Sprintf("%s: %d events up to resourceVersion %d, the watch opened again %d times after it ended, %d relists, %d errors", w.what, w.events, w.last, w.reopened-1, len(w.relists), w.errors)
	if w.firstErr != "" {
		s += " (first: " + w.firstErr + ")"
	}
	return s
}

// ConfigMapWatcher watches the ConfigMaps of namespace ns.
func ConfigMapWatcher(cs kubernetes.Interface, ns string) *RVWatcher {
	return &RVWatcher{
		what: "raw watch of the writer's ConfigMaps",
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

// LeaseWatcher watches every Lease in the cluster (the kubelets', the
// controllers' and the API servers' own heartbeats).
func LeaseWatcher(cs kubernetes.Interface) *RVWatcher {
	return &RVWatcher{
		what: "raw watch of every Lease",
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
