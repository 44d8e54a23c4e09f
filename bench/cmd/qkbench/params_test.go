package main

import (
	"slices"
	"testing"

	"github.com/quantyroot/quantykube/bench/internal/report"
	"github.com/quantyroot/quantykube/bench/internal/server"
)

// TestSizeRunExpectsTheKeySpaceWithoutListWrites: a size run (--keys)
// changes only the key count and drops the writes during LISTs; the move
// copies are expected on etcd alone, one per page size.
func TestSizeRunExpectsTheKeySpaceWithoutListWrites(t *testing.T) {
	p := paramsFor(false)
	p.CopyPageSizes = []int{0, 10000}
	big := p.withKeys(1000000)
	if big.Keys != 1000000 || big.ListWriteFor != 0 || big.PageSize != p.PageSize || big.ValueSize != p.ValueSize {
		t.Fatalf("withKeys(1000000) = %+v from %+v", big, p)
	}
	h := &harness{p: big, res: &report.Results{}, only: map[string]bool{"keyspace": true}}
	h.expectAll([]string{server.QuantyKube, server.Etcd})
	for _, c := range []struct {
		workload string
		stores   []string
	}{
		{wlCreate, []string{server.QuantyKube, server.Etcd}},
		{wlKeyspace, []string{server.QuantyKube, server.Etcd}},
		{wlUpdate, []string{server.QuantyKube, server.Etcd}},
		{wlListWrites, nil},
		{wlMoveCopy, []string{server.Etcd}},
		{wlMoveCopy + ", pages of 10000", []string{server.Etcd}},
	} {
		if got := h.res.Expected[c.workload]; !slices.Equal(got, c.stores) {
			t.Errorf("expected stores of %q = %v, want %v", c.workload, got, c.stores)
		}
	}

	h = &harness{p: p, res: &report.Results{}, only: map[string]bool{"keyspace": true}}
	h.expectAll([]string{server.QuantyKube, server.Etcd})
	if got := h.res.Expected[wlListWrites]; len(got) != 2 {
		t.Errorf("the main run expects the writes during LISTs on %v, want both stores", got)
	}
}

func TestParseInts(t *testing.T) {
	if got, err := parseInts("0, 10000"); err != nil || !slices.Equal(got, []int{0, 10000}) {
		t.Fatalf("parseInts = %v, %v", got, err)
	}
	for _, bad := range []string{"", "x", "-1", "1,,2"} {
		if _, err := parseInts(bad); err == nil {
			t.Errorf("parseInts(%q) accepted it", bad)
		}
	}
}

func TestMoveCopyTargetReadsTheEtcdColumn(t *testing.T) {
	for _, tg := range targets() {
		if tg.Workload == wlMoveCopy {
			if tg.Store != server.Etcd || tg.Other != "" || tg.Value != 50000 || tg.Metric != metricCopyRate {
				t.Fatalf("move copy target = %+v", tg)
			}
			return
		}
	}
	t.Fatal("no move copy target")
}
