// Package report holds the benchmark's results, aggregates them (median and
// min–max over runs) and renders docs/benchmarks.md.
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"
)

// Better says which direction of a metric is good.
type Better string

const (
	Higher Better = "higher"
	Lower  Better = "lower"
	// Neutral marks a figure that describes the run rather than grades a
	// store (how many keys a copy found); it has no arrow and no target.
	Neutral Better = "neutral"
)

// Sample is one figure from one run of one store.
type Sample struct {
	Run      int     `json:"run"`
	Store    string  `json:"store"`
	Workload string  `json:"workload"`
	Metric   string  `json:"metric"`
	Unit     string  `json:"unit"`
	Better   Better  `json:"better"`
	Value    float64 `json:"value"`
}

// NotApplicable records a workload a store cannot run, and why.
type NotApplicable struct {
	Store    string `json:"store"`
	Workload string `json:"workload"`
	Reason   string `json:"reason"`
}

// Results is everything one invocation of the harness produced. It is safe
// for use by one writer at a time (methods lock).
type Results struct {
	mu            sync.Mutex
	Quick         bool                `json:"quick"`
	Runs          int                 `json:"runs"`
	Members       int                 `json:"members,omitempty"` // 3 for the replicated runs; 0 or 1: single member
	Keys          int                 `json:"keys,omitempty"`    // key space size of a size run (--keys); 0: the main run's
	Started       time.Time           `json:"started"`
	Finished      time.Time           `json:"finished"`
	Machine       []KV                `json:"machine"`
	Versions      []KV                `json:"versions"`
	Parameters    []KV                `json:"parameters"`
	LoadBefore    string              `json:"load_before"`
	LoadAfter     string              `json:"load_after"`
	Samples       []Sample            `json:"samples"`
	NotApplicable []NotApplicable     `json:"not_applicable"`
	Failures      []string            `json:"failures"`
	Expected      map[string][]string `json:"expected"` // workload -> stores that must have run it
}

// KV is an ordered key/value line of the report.
type KV struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Add records a sample.
func (r *Results) Add(s Sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Samples = append(r.Samples, s)
}

// Expect records that store must produce samples of workload.
func (r *Results) Expect(workload, store string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Expected == nil {
		r.Expected = map[string][]string{}
	}
	for _, s := range r.Expected[workload] {
		if s == store {
			return
		}
	}
	r.Expected[workload] = append(r.Expected[workload], store)
}

// NA records that store cannot run workload (once per pair).
func (r *Results) NA(store, workload, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.NotApplicable {
		if n.Store == store && n.Workload == workload {
			return
		}
	}
	r.NotApplicable = append(r.NotApplicable, NotApplicable{store, workload, reason})
}

// Fail records a failure.
func (r *Results) Fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
}

// Save writes the results as JSON to path (atomically).
func (r *Results) Save(path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	return os.Rename(tmp, path)
}

// Load reads results saved by Save.
func Load(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return &r, nil
}

// Stat is the aggregate of one metric of one store over runs.
type Stat struct {
	Median, Min, Max float64
	N                int
}

// Aggregate returns the stat of (workload, metric, store); ok is false when
// there are no samples.
func (r *Results) Aggregate(workload, metric, store string) (Stat, bool) {
	var v []float64
	for _, s := range r.Samples {
		if s.Workload == workload && s.Metric == metric && s.Store == store {
			v = append(v, s.Value)
		}
	}
	if len(v) == 0 {
		return Stat{}, false
	}
	sort.Float64s(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Stat{Median: m, Min: v[0], Max: v[len(v)-1], N: len(v)}, true
}

// Check returns one line per expected (workload, store) pair that produced
// no sample and is not marked not applicable, plus every recorded failure.
func (r *Results) Check() []string {
	var problems []string
	problems = append(problems, r.Failures...)
	ws := make([]string, 0, len(r.Expected))
	for w := range r.Expected {
		ws = append(ws, w)
	}
	sort.Strings(ws)
	for _, w := range ws {
		for _, st := range r.Expected[w] {
			found := false
			for _, s := range r.Samples {
				if s.Workload == w && s.Store == st {
					found = true
					break
				}
			}
			for _, n := range r.NotApplicable {
				if n.Workload == w && n.Store == st {
					found = true
				}
			}
			if !found {
				problems = append(problems, fmt.Sprintf("workload %s did not run on %s", w, st))
			}
		}
	}
	return problems
}
