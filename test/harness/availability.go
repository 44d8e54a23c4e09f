package harness

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// A Prober measures how available the API is to one client: every Interval
// it reads a ConfigMap (GET) and, on its own schedule, writes it (an
// unconditional Update of a counter), each call bounded by Timeout, and
// records every success and failure. Reads and writes run independently, so
// a slow write does not delay the reads.
//
// The client is the caller's (for an HA cluster: one whose kubeconfig points
// at the load balancer), used as a controller uses client-go: one
// long-lived HTTP/2 connection, client-go's own retry of a GET on a lost
// connection included (a read it retried counts as a success, its time as
// latency, and so shows in the longest gap).
type Prober struct {
	cs        kubernetes.Interface
	ns, name  string
	interval  time.Duration
	timeout   time.Duration
	start     time.Time
	cancel    context.CancelFunc
	done      sync.WaitGroup
	reads     series
	writes    series
	stoppedAt time.Time
}

// ProbeInterval and ProbeTimeout are StartProber's cadence and per-call bound.
const (
	ProbeInterval = 100 * time.Millisecond
	ProbeTimeout  = 5 * time.Second
)

// StartProber makes (or takes over) ConfigMap ns/name and starts probing it
// every interval; Stop ends it and returns the figures.
func StartProber(ctx context.Context, cs kubernetes.Interface, ns, name string, interval, timeout time.Duration) (*Prober, error) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{"quantykube.io/harness": "availability"}}, Data: map[string]string{"seq": "0"}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create probe ConfigMap %s/%s: %w", ns, name, err)
	}
	p := &Prober{cs: cs, ns: ns, name: name, interval: interval, timeout: timeout, start: time.Now()}
	p.reads.last, p.writes.last = p.start, p.start
	run, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.done.Add(2)
	go p.loop(run, &p.reads, p.read)
	go p.loop(run, &p.writes, p.write)
	return p, nil
}

func (p *Prober) read(ctx context.Context, _ int) error {
	_, err := p.cs.CoreV1().ConfigMaps(p.ns).Get(ctx, p.name, metav1.GetOptions{})
	return err
}

func (p *Prober) write(ctx context.Context, seq int) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name,
		Labels: map[string]string{"quantykube.io/harness": "availability"}}, Data: map[string]string{"seq": strconv.Itoa(seq)}}
	_, err := p.cs.CoreV1().ConfigMaps(p.ns).Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

// loop calls op every interval (at once first) until ctx ends; a call still
// in flight then is finished, not cut short into a false failure.
func (p *Prober) loop(ctx context.Context, s *series, op func(context.Context, int) error) {
	defer p.done.Done()
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	for seq := 1; ; seq++ {
		callCtx, cancel := context.WithTimeout(context.Background(), p.timeout)
		began := time.Now()
		err := op(callCtx, seq)
		cancel()
		s.record(began, time.Now(), err)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Stop ends the probing and returns what was seen from StartProber to now.
func (p *Prober) Stop() Availability {
	p.cancel()
	p.done.Wait()
	end := time.Now()
	p.reads.finish(end)
	p.writes.finish(end)
	return Availability{Duration: end.Sub(p.start), Reads: p.reads.summary("reads"), Writes: p.writes.summary("writes")}
}

// Availability is what a Prober saw.
type Availability struct {
	Duration      time.Duration
	Reads, Writes Series
}

// Series is one kind of call's record.
type Series struct {
	Kind       string
	OK, Failed int
	// LongestGap is the longest time without a successful call: between
	// two successes' ends (or from the start, or to the end). With nothing
	// failing it is about the interval plus a call's latency.
	LongestGap time.Duration
	GapEnd     time.Time // when the longest gap ended
	End        time.Time // when the prober stopped
	MaxLatency time.Duration
	// Windows are the failure windows in order: from the start of the
	// first failed call to the end of the next successful one.
	Windows []Window
}

// Window is one run of failed calls.
type Window struct {
	Start, End time.Time // End is zero when no call succeeded after it
	Failures   int
	FirstErr   string
}

// Duration of the window (to the prober's end when it never closed).
func (w Window) Duration(end time.Time) time.Duration {
	if w.End.IsZero() {
		return end.Sub(w.Start)
	}
	return w.End.Sub(w.Start)
}

// String is one line: counts, longest gap, the failure windows.
func (s Series) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d ok, %d failed, longest gap %v, slowest call %v", s.Kind, s.OK, s.Failed,
		s.LongestGap.Round(time.Millisecond), s.MaxLatency.Round(time.Millisecond))
	if len(s.Windows) == 0 {
		fmt.Fprintf(&b, ", never failed")
	}
	for _, w := range s.Windows {
		fmt.Fprintf(&b, "; %d failed from %s for %v (%s)", w.Failures, w.Start.UTC().Format("15:04:05.000"),
			w.Duration(s.End).Round(time.Millisecond), w.FirstErr)
	}
	return b.String()
}

// String is the reads' and the writes' lines.
func (a Availability) String() string {
	return fmt.Sprintf("over %v: %v\n%v", a.Duration.Round(time.Millisecond), a.Reads, a.Writes)
}

// series accumulates one loop's calls; only its loop writes it before Stop.
type series struct {
	last time.Time // end of the last success (the start before any)
	s    Series
	open *Window
}

func (s *series) record(began, ended time.Time, err error) {
	if d := ended.Sub(began); d > s.s.MaxLatency {
		s.s.MaxLatency = d
	}
	if err != nil {
		s.s.Failed++
		if s.open == nil {
			s.open = &Window{Start: began, FirstErr: err.Error()}
		}
		s.open.Failures++
		return
	}
	s.s.OK++
	s.gap(ended)
	if s.open != nil {
		s.open.End = ended
		s.s.Windows = append(s.s.Windows, *s.open)
		s.open = nil
	}
}

func (s *series) gap(until time.Time) {
	if d := until.Sub(s.last); d > s.s.LongestGap {
		s.s.LongestGap, s.s.GapEnd = d, until
	}
	s.last = until
}

// finish closes the record at end: the time since the last success is a
// gap too, and a window still open stays open (End zero).
func (s *series) finish(end time.Time) {
	s.gap(end)
	s.s.End = end
	if s.open != nil {
		s.s.Windows = append(s.s.Windows, *s.open)
		s.open = nil
	}
}

func (s *series) summary(kind string) Series {
	out := s.s
	out.Kind = kind
	return out
}

// LongestWindow is the longest failure window (zero when none).
func (s Series) LongestWindow() time.Duration {
	var d time.Duration
	for _, w := range s.Windows {
		d = max(d, w.Duration(s.End))
	}
	return d
}
