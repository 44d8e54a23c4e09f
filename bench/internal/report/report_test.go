package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAggregateMedianMinMax(t *testing.T) {
	r := &Results{}
	for i, v := range []float64{3, 1, 2, 10} {
		r.Add(Sample{Run: i + 1, Store: "a", Workload: "w", Metric: "m", Value: v})
	}
	s, ok := r.Aggregate("w", "m", "a")
	if !ok || s.Median != 2.5 || s.Min != 1 || s.Max != 10 || s.N != 4 {
		t.Fatalf("Aggregate = %+v, %v; want median 2.5, min 1, max 10, n 4", s, ok)
	}
	if _, ok := r.Aggregate("w", "m", "b"); ok {
		t.Fatal("Aggregate of a store without samples reported ok")
	}
}

func TestCheckNamesMissingWorkloads(t *testing.T) {
	r := &Results{}
	r.Expect("w1", "a")
	r.Expect("w1", "b")
	r.Expect("w2", "b")
	r.Add(Sample{Store: "a", Workload: "w1", Metric: "m"})
	r.NA("b", "w2", "cannot")
	got := r.Check()
	if len(got) != 1 || !strings.Contains(got[0], "w1 did not run on b") {
		t.Fatalf("Check = %q, want exactly w1 on b", got)
	}
	r.Fail("boom")
	if got := r.Check(); len(got) != 2 || got[0] != "boom" {
		t.Fatalf("Check after Fail = %q", got)
	}
}

func TestRenderRatiosAndTargets(t *testing.T) {
	r := &Results{Runs: 1}
	r.Add(Sample{Store: "q", Workload: "put", Metric: "throughput", Unit: "req/s", Better: Higher, Value: 3000})
	r.Add(Sample{Store: "e", Workload: "put", Metric: "throughput", Unit: "req/s", Better: Higher, Value: 1000})
	r.Add(Sample{Store: "q", Workload: "put", Metric: "p99", Unit: "ms", Better: Lower, Value: 2})
	r.Add(Sample{Store: "e", Workload: "put", Metric: "p99", Unit: "ms", Better: Lower, Value: 1})
	r.NA("k", "put", "no put")
	path := filepath.Join(t.TempDir(), "out.md")
	targets := []Target{
		{Text: "put ≥ 2.5×", Workload: "put", Metric: "throughput", Other: "e", Factor: 2.5},
		{Text: "p99 ≤", Workload: "put", Metric: "p99", Other: "e", Factor: 1},
	}
	if err := Render(r, path, []string{"q", "e", "k"}, "e", targets, "# T", "## Analysis"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	for _, want := range []string{
		"| put | throughput (req/s) ↑ | 3,000 | 1,000 | n/a | 3.00× | – |",
		"| put ≥ 2.5× | 3,000 | e: 1,000 | 3.00× | yes |",
		"| p99 ≤ | 2.00 | e: 1.00 | 2.00× | no |",
		"## Analysis",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestRenderTargetAgainstAFixedFigure: a target with no Other store is
// judged against Value in the metric's unit, on the median of the column
// Store names (here the etcd run's, where the move copy is recorded).
func TestRenderTargetAgainstAFixedFigure(t *testing.T) {
	r := &Results{Runs: 3}
	for i, v := range []float64{40000, 70000, 60000} {
		r.Add(Sample{Run: i + 1, Store: "e", Workload: "copy", Metric: "copy rate", Unit: "keys/s", Better: Higher, Value: v})
	}
	r.Add(Sample{Run: 1, Store: "e", Workload: "copy", Metric: "copy time", Unit: "ms", Better: Lower, Value: 900})
	r.Add(Sample{Run: 1, Store: "e", Workload: "copy", Metric: "keys copied", Unit: "keys", Better: Neutral, Value: 50000})
	targets := []Target{
		{Text: "copy ≥ 50k keys/s", Workload: "copy", Metric: "copy rate", Value: 50000, Store: "e"},
		{Text: "copy ≥ 80k keys/s", Workload: "copy", Metric: "copy rate", Value: 80000, Store: "e"},
		{Text: "copy ≤ 1 s", Workload: "copy", Metric: "copy time", Value: 1000, Store: "e"},
		{Text: "copy ≤ 0.5 s", Workload: "copy", Metric: "copy time", Value: 500, Store: "e"},
		{Text: "subject's copy ≥ 50k keys/s", Workload: "copy", Metric: "copy rate", Value: 50000},
	}
	out := renderString(t, r, []string{"q", "e"}, "e", targets)
	for _, want := range []string{
		"| copy ≥ 50k keys/s | 60,000 (e's run) | fixed: 50,000 keys/s | 1.20× | yes |",
		"| copy ≥ 80k keys/s | 60,000 (e's run) | fixed: 80,000 keys/s | 0.75× | no |",
		"| copy ≤ 1 s | 900 (e's run) | fixed: 1,000 ms | 0.90× | yes |",
		"| copy ≤ 0.5 s | 900 (e's run) | fixed: 500 ms | 1.80× | no |",
		"| subject's copy ≥ 50k keys/s | – | – | – | not measured |",
		"| copy | copy rate (keys/s) ↑ | – | 60,000 (40,000–70,000) | – |",
		"| copy | keys copied (keys) | – | 50,000 | – |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func renderString(t *testing.T, r *Results, stores []string, ref string, targets []Target) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.md")
	if err := Render(r, path, stores, ref, targets, "# T", ""); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRenderOneStoreHasNoRatioColumn: the results table of a run of one
// store (bench/run.sh --keys N --stores etcd) has a header of exactly its
// columns, as many cells as its separator line.
func TestRenderOneStoreHasNoRatioColumn(t *testing.T) {
	r := &Results{Runs: 1}
	r.Add(Sample{Store: "e", Workload: "put", Metric: "throughput", Unit: "req/s", Better: Higher, Value: 1000})
	path := filepath.Join(t.TempDir(), "out.md")
	if err := Render(r, path, []string{"e"}, "e", nil, "# T", ""); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| workload | metric | e |\n|---|---|---:|\n", "| put | throughput (req/s) ↑ | 1,000 |\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report lacks %q:\n%s", want, b)
		}
	}
}
