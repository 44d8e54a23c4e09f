package harness

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestSeriesGapsAndWindows(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	s := series{last: t0}
	s.record(at(0), at(10), nil)
	s.record(at(100), at(110), nil)
	s.record(at(200), at(210), errors.New("refused"))
	s.record(at(300), at(900), errors.New("timeout"))
	s.record(at(1000), at(1020), nil) // gap 110 → 1020
	s.record(at(1100), at(1110), nil)
	s.record(at(1200), at(1250), errors.New("reset")) // open at the end
	s.finish(at(1300))
	got := s.summary("reads")
	if got.OK != 4 || got.Failed != 3 {
		t.Fatalf("ok %d failed %d; want 4 and 3", got.OK, got.Failed)
	}
	if got.LongestGap != 910*time.Millisecond || !got.GapEnd.Equal(at(1020)) {
		t.Fatalf("longest gap %v ending %v; want 910ms ending at +1020ms", got.LongestGap, got.GapEnd)
	}
	if got.MaxLatency != 600*time.Millisecond {
		t.Fatalf("slowest call %v; want 600ms", got.MaxLatency)
	}
	if len(got.Windows) != 2 {
		t.Fatalf("windows %+v; want 2", got.Windows)
	}
	w := got.Windows[0]
	if !w.Start.Equal(at(200)) || !w.End.Equal(at(1020)) || w.Failures != 2 || w.FirstErr != "refused" {
		t.Fatalf("first window %+v; want +200ms..+1020ms, 2 failures, first error refused", w)
	}
	if w := got.Windows[1]; !w.End.IsZero() || w.Duration(got.End) != 100*time.Millisecond {
		t.Fatalf("last window %+v; want open, 100ms to the end", w)
	}
	if got.LongestWindow() != 820*time.Millisecond {
		t.Fatalf("longest window %v; want 820ms", got.LongestWindow())
	}
	if line := got.String(); !strings.Contains(line, "4 ok, 3 failed, longest gap 910ms") {
		t.Fatalf("String() = %q", line)
	}
}

// fakeAPI serves one ConfigMap like kube-apiserver does (GET, POST, PUT),
// or, while down, answers every request 503 (an API server that is not ready).
type fakeAPI struct {
	down   atomic.Bool
	mu     sync.Mutex
	cm     *corev1.ConfigMap
	writes int
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.down.Load() {
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":503}`, http.StatusServiceUnavailable)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.Method {
	case http.MethodPost, http.MethodPut:
		body, _ := io.ReadAll(r.Body)
		cm := &corev1.ConfigMap{}
		if err := json.Unmarshal(body, cm); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.writes++
		f.cm = cm
	case http.MethodGet:
		if f.cm == nil {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure", Reason: metav1.StatusReasonNotFound, Code: 404})
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	out := f.cm.DeepCopy()
	out.TypeMeta = metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"}
	_ = json.NewEncoder(w).Encode(out)
}

func TestProberSeesAnOutage(t *testing.T) {
	api := &fakeAPI{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000,
		ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := StartProber(context.Background(), cs, "default", "probe", 10*time.Millisecond, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	api.down.Store(true)
	time.Sleep(300 * time.Millisecond)
	api.down.Store(false)
	time.Sleep(150 * time.Millisecond)
	a := p.Stop()
	t.Log(a)
	for _, s := range []Series{a.Reads, a.Writes} {
		if s.OK < 3 || s.Failed < 3 || len(s.Windows) != 1 {
			t.Fatalf("%v; want ≥3 ok, ≥3 failed, one window", s)
		}
		// The bounds leave room for a loaded machine's scheduling: above the
		// outage, a second; below it, 50ms, as the window's check below (a
		// call answered just before the flag turned, or just after it turned
		// back, is stamped when it returns: CI, 7 December, 299.6ms).
		if s.LongestGap < 250*time.Millisecond || s.LongestGap > 1300*time.Millisecond {
			t.Fatalf("%s longest gap %v; want the 300ms outage, less 50ms or plus at most a second", s.Kind, s.LongestGap)
		}
		if w := s.Windows[0]; w.End.IsZero() || w.Duration(s.End) < 250*time.Millisecond {
			t.Fatalf("%s window %+v; want closed, about 300ms", s.Kind, w)
		}
	}
	if api.writes < a.Writes.OK {
		t.Fatalf("server saw %d writes; the prober counted %d ok", api.writes, a.Writes.OK)
	}
}
