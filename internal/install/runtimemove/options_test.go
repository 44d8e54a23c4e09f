package runtimemove

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// TestNoPrepull: --no-prepull keeps the plan's steps (the journal of an
// interrupted run matches either way), says in the plan that the pods pull
// at restart, and its prepull step touches nothing (no runtime, no meta).
func TestNoPrepull(t *testing.T) {
	names := func(m *Mover) string {
		var n []string
		for _, s := range m.installPlan().Steps {
			n = append(n, s.Name)
		}
		return strings.Join(n, " ")
	}
	var out bytes.Buffer
	log := slog.New(slog.DiscardHandler)
	with, without := &Mover{Out: &out, Log: log}, &Mover{Out: &out, Log: log, NoPrepull: true}
	if a, b := names(with), names(without); a != b {
		t.Fatalf("steps differ: %q with the prepull, %q without", a, b)
	}
	for _, s := range without.installPlan().Steps {
		if s.Name != "prepull" {
			continue
		}
		if !strings.Contains(s.Impact, "--no-prepull") || !strings.Contains(s.Impact, "when they restart") {
			t.Fatalf("the plan does not say the pods pull at restart: %q", s.Impact)
		}
		if err := s.Do(context.Background()); err != nil {
			t.Fatalf("a skipped prepull failed: %v", err)
		}
	}
	if !strings.Contains(out.String(), "skipped") {
		t.Fatalf("the skipped prepull printed nothing: %q", out.String())
	}
}

func TestNoPrepullWithArchivesRefused(t *testing.T) {
	p := DefaultPaths()
	p.StateDir, p.ImageArchives = t.TempDir(), "/opt/images"
	var out bytes.Buffer
	m := &Mover{Paths: p, Out: &out, NoPrepull: true, NodeName: "n1"}
	err := m.Install(context.Background(), true)
	if err == nil || !strings.Contains(err.Error(), "drop one of the two flags") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("want a one-line refusal, got %v", err)
	}
	if out.Len() != 0 {
		t.Fatalf("a refused install printed a plan: %q", out.String())
	}
}
