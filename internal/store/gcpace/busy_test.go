package gcpace

import (
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestBusyMeter walks the floor through a spell: at rest no floor, a fast
// allocator raises it to a window's allocations, a moderate rate drops it
// without a release, and the first second at rest releases once.
func TestBusyMeter(t *testing.T) {
	const mib = 1 << 20
	t0 := time.Unix(0, 0)
	b := busyMeter{window: 250 * time.Millisecond, at: t0}
	var allocs uint64
	step := func(perSecond uint64) bool {
		allocs += perSecond
		t0 = t0.Add(time.Second)
		return b.measure(allocs, t0)
	}
	for _, s := range []struct {
		name        string
		perSecond   uint64
		wantFloor   uint64
		wantRelease bool
	}{
		{"at rest", 1 * mib, 0, false},
		{"a window's worth under the least headroom", 60 * mib, 0, false},
		{"busy", 200 * mib, 50 * mib, false},
		{"busier", 400 * mib, 100 * mib, false},
		{"moderate: floor gone, not at rest", 20 * mib, 0, false},
		{"at rest after the spell releases", 1 * mib, 0, true},
		{"and only once", 1 * mib, 0, false},
	} {
		release := step(s.perSecond)
		if b.floor != s.wantFloor || release != s.wantRelease {
			t.Errorf("%s (%d MiB/s): floor %d MiB, release %v; want %d MiB, %v", s.name, s.perSecond/mib, b.floor/mib, release, s.wantFloor/mib, s.wantRelease)
		}
	}
	if b.measure(allocs-1, t0.Add(time.Second)) || b.measure(allocs, t0) {
		t.Error("a counter going back or no time passing released")
	}
}

var sink []byte

// TestPacerWidensHeadroomWhileBusy runs a pacer with a busy window against
// the test's own runtime: with most of a small heap the engine's, GOGC is
// low at rest; allocating hundreds of MiB a second raises it (a cycle at
// most every window), and it comes down once the allocations stop.
func TestPacerWidensHeadroomWhileBusy(t *testing.T) {
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	held := make([]byte, 64<<20)
	p := Start(func() uint64 { return uint64(len(held)) }, 2*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer p.Stop()
	waitGOGC(t, "at rest", func(g int) bool { return g < 50 }, func() { runtime.GC() })
	atRest := gogc()
	waitGOGC(t, "while allocating", func(g int) bool { return g > atRest+20 }, func() {
		for range 256 {
			sink = make([]byte, 64<<10)
		}
	})
	waitGOGC(t, "after the allocations stopped", func(g int) bool { return g <= atRest+5 }, func() {})
	runtime.KeepAlive(held)
}

// waitGOGC calls work until ok holds for GOGC, for at most 30 s.
func waitGOGC(t *testing.T, when string, ok func(int) bool, work func()) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok(gogc()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: GOGC still %d after 30 s", when, gogc())
		}
		work()
		time.Sleep(time.Millisecond)
	}
}
