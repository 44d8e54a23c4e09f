package gcpace

import (
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name   string
		base   int
		h      Heap
		engine uint64
		busy   uint64
		want   int
	}{
		{"no engine memory keeps GOGC", 100, Heap{Live: 50 * mib}, 0, 0, 100},
		{"the engine's half takes half the headroom", 100, Heap{Live: 50 * mib}, 25 * mib, 0, 50},
		{"stacks and globals count as collected", 100, Heap{Live: 40 * mib, Stacks: 5 * mib, Globals: 5 * mib}, 25 * mib, 0, 50},
		{"scales with the base", 200, Heap{Live: 50 * mib}, 25 * mib, 0, 100},
		{"the minimum headroom stays", 100, Heap{Live: 100 * mib}, 99 * mib, 0, 16},
		{"the minimum scales with the base", 50, Heap{Live: 100 * mib}, 99 * mib, 0, 8},
		{"engine above live (sampled apart) is capped", 100, Heap{Live: 100 * mib}, 200 * mib, 0, 16},
		{"never below 1", 100, Heap{Live: 1 << 40}, 1 << 40, 0, 1},
		{"never above the base", 100, Heap{Live: 1 * mib}, 0, 0, 100},
		{"GOGC off stays off", -1, Heap{Live: 50 * mib}, 25 * mib, 0, -1},
		{"an empty heap keeps the base", 100, Heap{}, 0, 0, 100},
		{"a busy floor widens the headroom", 100, Heap{Live: 100 * mib}, 90 * mib, 50 * mib, 50},
		{"a busy floor under the rest changes nothing", 100, Heap{Live: 100 * mib}, 50 * mib, 20 * mib, 50},
		{"a busy floor never goes above the base", 100, Heap{Live: 100 * mib}, 90 * mib, 500 * mib, 100},
	} {
		if got := Percent(c.base, c.h, c.engine, c.busy); got != c.want {
			t.Errorf("%s: Percent(%d, %+v, %d, %d) = %d, want %d", c.name, c.base, c.h, c.engine, c.busy, got, c.want)
		}
	}
}

// TestPacerFollowsGCCycles runs a pacer against the test's own runtime: an
// engine holding most of the live heap lowers GOGC after the next cycles,
// and Stop gives the starting GOGC back.
func TestPacerFollowsGCCycles(t *testing.T) {
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	held := make([]byte, 64<<20) // the "engine's" bytes, live
	p := Start(func() uint64 { return uint64(len(held)) }, 0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer p.Stop()
	deadline := time.Now().Add(20 * time.Second)
	for gogc() >= 100 {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC still %d after 20 s of GC cycles with 64 MiB of engine memory live", gogc())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if g := gogc(); g > 50 {
		t.Errorf("GOGC %d with 64 MiB of a small heap the engine's, want well under 100", g)
	}
	runtime.KeepAlive(held)
	p.Stop()
	p.Stop()
	if g := gogc(); g != 100 {
		t.Errorf("GOGC %d after Stop, want the starting 100", g)
	}
}

func TestPacerWithGCOff(t *testing.T) {
	base := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(base)
	p := Start(func() uint64 { return 1 << 30 }, 0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	runtime.GC()
	p.Stop()
	if g := gogc(); g >= 0 { // off reads as -1 (the uint64 of SetGCPercent(-1))
		t.Errorf("GOGC %d with GC off, want it left off", g)
	}
}

func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}
