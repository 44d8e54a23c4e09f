package harness

import (
	"strings"
	"testing"
)

// TestWriterObserve holds read-back versions to the writer's invariants:
// the held write at its resourceVersion, or an unanswered write above it.
func TestWriterObserve(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ghosts []int
		got    version
		wrong  string // a substring of the violation; "" for none
	}{
		{name: "unchanged", got: version{rv: 100, seq: 7}},
		{name: "an unanswered write landed", ghosts: []int{9}, got: version{rv: 120, seq: 9}},
		{name: "changed without a write", got: version{rv: 140, seq: 7}, wrong: "changed without a write"},
		{name: "renumbered down", got: version{rv: 90, seq: 7}, wrong: "changed without a write"},
		{name: "an unanswered write below the held one", ghosts: []int{9}, got: version{rv: 95, seq: 9}, wrong: "not above 100"},
		{name: "data no write had", got: version{rv: 130, seq: 3}, wrong: "neither the acknowledged write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &Writer{held: map[string]version{"hot-00": {rv: 100, seq: 7}}, ghosts: map[string]map[int]bool{}}
			for _, g := range tc.ghosts {
				w.ghost("hot-00", g)
			}
			w.observe("hot-00", tc.got)
			switch {
			case tc.wrong == "" && len(w.wrong) > 0:
				t.Fatalf("a violation where there is none: %v", w.wrong)
			case tc.wrong != "" && (len(w.wrong) != 1 || !strings.Contains(w.wrong[0], tc.wrong)):
				t.Fatalf("want one violation with %q, got %v", tc.wrong, w.wrong)
			}
			if w.held["hot-00"] != tc.got {
				t.Fatalf("held %v after the read, want %v", w.held["hot-00"], tc.got)
			}
		})
	}
}
