package report

import (
	"fmt"
	"math"
	"os"
	"strings"
)

// Target is one of the goals for the store, compared on medians:
// against another store's median (Other and Factor), or against a fixed
// figure in the metric's unit (Value, with Other empty).
type Target struct {
	Text     string // as the issue states it
	Workload string
	Metric   string
	Other    string  // the store compared with (etcd or kine); empty: compared with Value
	Factor   float64 // store must be >= Factor×other (Higher) or <= Factor×other (Lower)
	Value    float64 // with Other empty: store must be >= Value (Higher) or <= Value (Lower)
	// Store is the column the judged figure is read from; empty means the
	// report's subject (its first store). A figure measured during another
	// store's run (the move copy, whose source is the etcd run) names it.
	Store string
}

// fixed reports whether t compares with a fixed figure rather than a store.
func (t Target) fixed() bool { return t.Other == "" }

// Render writes the markdown report to path. stores are the columns, in
// order; the first is the subject, ref the reference store for ratios.
// analysis (may be empty) is appended verbatim.
func Render(r *Results, path string, stores []string, ref string, targets []Target, intro, analysis string) error {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("%s\n", strings.TrimSpace(intro))
	w("\n## Machine and conditions\n\n")
	for _, kv := range r.Machine {
		w("- %s: %s\n", kv.Key, kv.Value)
	}
	w("- load average before the run: %s\n- load average after the run: %s\n", r.LoadBefore, r.LoadAfter)
	w("- started %s, finished %s (%s)\n", r.Started.UTC().Format("2006-01-02 15:04 MST"),
		r.Finished.UTC().Format("15:04 MST"), r.Finished.Sub(r.Started).Round(1e9))
	w("\n## Versions\n\n")
	for _, kv := range r.Versions {
		w("- %s: %s\n", kv.Key, kv.Value)
	}
	w("\n## Parameters\n\n")
	for _, kv := range r.Parameters {
		w("- %s: %s\n", kv.Key, kv.Value)
	}

	w("\n## Results\n\nMedian of %d interleaved run(s), min–max in parentheses. Ratios are medians ÷ %s's median; "+
		"the arrow says which direction is better (a row without one describes the run).\n\n", r.Runs, ref)
	heads := append(append([]string{"workload", "metric"}, stores...), ratioHeads(stores, ref)...)
	w("| %s |", strings.Join(heads, " | ")) // a run of one store has no ratio column
	w("\n|---|---|%s%s\n", strings.Repeat("---:|", len(stores)), strings.Repeat("---:|", len(stores)-1))
	for _, row := range rows(r) {
		w("| %s | %s |", row.workload, row.label())
		refStat, refOK := r.Aggregate(row.workload, row.metric, ref)
		for _, st := range stores {
			w(" %s |", cell(r, row.workload, row.metric, st))
		}
		for _, st := range stores {
			if st == ref {
				continue
			}
			s, ok := r.Aggregate(row.workload, row.metric, st)
			if ok && refOK && refStat.Median != 0 {
				w(" %.2f× |", s.Median/refStat.Median)
			} else {
				w(" – |")
			}
		}
		w("\n")
	}
	if len(r.NotApplicable) > 0 {
		w("\n“n/a” cells:\n\n")
		for _, n := range r.NotApplicable {
			w("- %s, %s: %s\n", n.Store, n.Workload, n.Reason)
		}
	}
	if len(r.Failures) > 0 {
		w("\nFailures during the run (their cells are missing or have fewer samples):\n\n")
		for _, f := range r.Failures {
			w("- %s\n", strings.ReplaceAll(f, "\n", " "))
		}
	}

	if len(targets) > 0 {
		subject := stores[0]
		w("\n## Targets for %s (issue 5; tracked, never asserted)\n\n", subject)
		w("| target | %s | other | ratio | met |\n|---|---:|---:|---:|---|\n", subject)
		for _, t := range targets {
			w("%s\n", targetRow(r, t, subject))
		}
	}
	if a := strings.TrimSpace(analysis); a != "" {
		w("\n%s\n", a)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// targetRow renders one line of the targets table: the judged figure (the
// subject's median, or t.Store's), what it is compared with, the ratio, and
// whether the target is met. A target against a store is met when the ratio
// is at least (Higher) or at most (Lower) t.Factor; one against a fixed
// figure when the median is at least (Higher) or at most (Lower) t.Value.
func targetRow(r *Results, t Target, subject string) string {
	col := subject
	if t.Store != "" {
		col = t.Store
	}
	s, ok := r.Aggregate(t.Workload, t.Metric, col)
	if !ok {
		return fmt.Sprintf("| %s | – | – | – | not measured |", t.Text)
	}
	figure := format(s.Median)
	if col != subject {
		figure += fmt.Sprintf(" (%s's run)", col)
	}
	other, bound := "", t.Factor
	var ratio float64
	if t.fixed() {
		other = fmt.Sprintf("fixed: %s %s", format(t.Value), unitOf(r, t.Workload, t.Metric))
		ratio, bound = s.Median/t.Value, 1
	} else {
		o, ok := r.Aggregate(t.Workload, t.Metric, t.Other)
		if !ok {
			return fmt.Sprintf("| %s | – | – | – | not measured |", t.Text)
		}
		other, ratio = fmt.Sprintf("%s: %s", t.Other, format(o.Median)), s.Median/o.Median
	}
	met := ratio >= bound
	if betterOf(r, t.Workload, t.Metric) == Lower {
		met = ratio <= bound
	}
	verdict := "no"
	if met {
		verdict = "yes"
	}
	return fmt.Sprintf("| %s | %s | %s | %.2f× | %s |", t.Text, figure, other, ratio, verdict)
}

type row struct {
	workload, metric, unit string
	better                 Better
}

// label is the metric column: name, unit and the better direction's arrow.
func (r row) label() string {
	switch r.better {
	case Lower:
		return fmt.Sprintf("%s (%s) ↓", r.metric, r.unit)
	case Neutral:
		return fmt.Sprintf("%s (%s)", r.metric, r.unit)
	default:
		return fmt.Sprintf("%s (%s) ↑", r.metric, r.unit)
	}
}

// rows returns each (workload, metric) once, grouped by workload, workloads
// and their metrics in the order first recorded.
func rows(r *Results) []row {
	var order []string
	byWorkload := map[string][]row{}
	seen := map[string]bool{}
	for _, s := range r.Samples {
		if _, ok := byWorkload[s.Workload]; !ok {
			order = append(order, s.Workload)
		}
		k := s.Workload + "\x00" + s.Metric
		if !seen[k] {
			seen[k] = true
			byWorkload[s.Workload] = append(byWorkload[s.Workload], row{s.Workload, s.Metric, s.Unit, s.Better})
		}
	}
	var out []row
	for _, w := range order {
		out = append(out, byWorkload[w]...)
	}
	return out
}

// unitOf returns the unit recorded with (workload, metric), or "".
func unitOf(r *Results, workload, metric string) string {
	for _, s := range r.Samples {
		if s.Workload == workload && s.Metric == metric {
			return s.Unit
		}
	}
	return ""
}

func betterOf(r *Results, workload, metric string) Better {
	for _, s := range r.Samples {
		if s.Workload == workload && s.Metric == metric {
			return s.Better
		}
	}
	return Higher
}

func ratioHeads(stores []string, ref string) []string {
	var h []string
	for _, s := range stores {
		if s != ref {
			h = append(h, s+" ÷ "+ref)
		}
	}
	return h
}

func cell(r *Results, workload, metric, store string) string {
	s, ok := r.Aggregate(workload, metric, store)
	if !ok {
		for _, n := range r.NotApplicable {
			if n.Workload == workload && n.Store == store {
				return "n/a"
			}
		}
		return "–"
	}
	if s.N == 1 {
		return format(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", format(s.Median), format(s.Min), format(s.Max))
}

// format prints a figure with about three significant digits.
func format(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1000:
		return withCommas(int64(math.Round(v)))
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func withCommas(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
