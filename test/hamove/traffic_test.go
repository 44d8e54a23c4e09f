package hamove

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// traffic is a writer and a reader that fail over between the API servers
// the way a client behind a load balancer would: each request goes to the
// server that answered last, and on an error to the next one.
type traffic struct {
	direct []*kubernetes.Clientset
	ns     string

	mu     sync.Mutex
	reads  []time.Time
	writes []time.Time
	// acked is every acknowledged create: name → resourceVersion.
	acked map[string]string
	// backwards counts quorum list resourceVersions lower than one seen before.
	backwards int
	lastRV    int64
	errors    map[string]int
}

func newTraffic(direct []*kubernetes.Clientset, ns string) *traffic {
	return &traffic{direct: direct, ns: ns, acked: map[string]string{}, errors: map[string]int{}}
}

// run starts the writer and the reader (one request every 50 ms each).
func (tr *traffic) run(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(2)
	go func() { defer wg.Done(); tr.writer(ctx) }()
	go func() { defer wg.Done(); tr.reader(ctx) }()
}

func (tr *traffic) fail(kind string, err error) {
	tr.mu.Lock()
	tr.errors[kind]++
	tr.mu.Unlock()
}

func (tr *traffic) writer(ctx context.Context) {
	srv := 0
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("w-%06d", i)
		for ctx.Err() == nil {
			cs := tr.direct[srv%len(tr.direct)]
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			cm, err := cs.CoreV1().ConfigMaps(tr.ns).Create(cctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"i": strconv.Itoa(i)}}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) { // an earlier try landed, its answer was lost
				cm, err = cs.CoreV1().ConfigMaps(tr.ns).Get(cctx, name, metav1.GetOptions{})
			}
			cancel()
			if err != nil {
				tr.fail("write", err)
				srv++
				time.Sleep(20 * time.Millisecond)
				continue
			}
			tr.mu.Lock()
			tr.writes = append(tr.writes, time.Now())
			tr.acked[name] = cm.ResourceVersion
			tr.mu.Unlock()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (tr *traffic) reader(ctx context.Context) {
	srv := 0
	for ctx.Err() == nil {
		cs := tr.direct[srv%len(tr.direct)]
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		l, err := cs.CoreV1().ConfigMaps(tr.ns).List(cctx, metav1.ListOptions{Limit: 1})
		cancel()
		if err != nil {
			tr.fail("read", err)
			srv++
			time.Sleep(20 * time.Millisecond)
			continue
		}
		rv, _ := strconv.ParseInt(l.ResourceVersion, 10, 64)
		tr.mu.Lock()
		tr.reads = append(tr.reads, time.Now())
		if rv < tr.lastRV {
			tr.backwards++
		}
		tr.lastRV = max(tr.lastRV, rv)
		tr.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
}

// gap is the longest time between two successes in ts within [from, to].
func gap(ts []time.Time, from, to time.Time) time.Duration {
	var g time.Duration
	prev := from
	for _, t := range ts {
		if t.Before(from) {
			continue
		}
		if t.After(to) {
			break
		}
		g = max(g, t.Sub(prev))
		prev = t
	}
	return max(g, to.Sub(prev))
}

func (tr *traffic) gaps(from, to time.Time) (read, write time.Duration) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return gap(tr.reads, from, to), gap(tr.writes, from, to)
}

// check compares every acknowledged write with what the cluster holds now:
// the object is there with the resourceVersion its create was answered with.
func (tr *traffic) check(t *testing.T, cs *kubernetes.Clientset) int {
	t.Helper()
	l, err := cs.CoreV1().ConfigMaps(tr.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]string{}
	for _, o := range l.Items {
		have[o.Name] = o.ResourceVersion
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	lost := 0
	for name, rv := range tr.acked {
		if have[name] != rv {
			lost++
			if lost < 10 {
				t.Errorf("acknowledged write %s (resourceVersion %s) is %q now", name, rv, have[name])
			}
		}
	}
	if tr.backwards > 0 {
		t.Errorf("a quorum list's resourceVersion went backwards %d times", tr.backwards)
	}
	return len(tr.acked)
}
