// Package gcpace paces Go's garbage collector on the memory it collects,
// leaving out what a storage engine allocates and frees by hand.
//
// Go's GC lets the heap grow by GOGC percent of what it found live (plus
// goroutine stacks and globals) before the next cycle: that headroom is
// where garbage collects between cycles. Built without cgo — as the image
// and the kubeadm scripts build the store — pebble's memtables and block
// cache are Go heap (its manual allocator falls back to make), so they count
// as live and the default GOGC=100 gives them headroom too: 16–40 MiB of
// memory the GC never reclaims until pebble lets go of it, doubled (ADR 013).
// Built with cgo they are C allocations and the GC never sees them.
//
// A Pacer makes the no-cgo store behave as the cgo one: after every GC cycle
// it sets GOGC so that the heap's goal is what the starting GOGC gives for
// the collected memory alone:
//
//	goal = live + (live + stacks + globals − engine) × base / 100
//
// which Go computes from GOGC as live + (live + stacks + globals) × GOGC/100.
// The headroom is at least minHeadroom (16 MiB at GOGC=100) and, while the
// process allocates fast, at least what it allocates in a window (busy.go),
// and GOGC is never raised above the starting value: the pacer only ever
// takes back headroom given to the engine's bytes.
package gcpace

import (
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// minHeadroom is the least headroom at GOGC=100 (scaled by GOGC/100 as
// Go scales its own 4 MiB minimum heap). A cycle has a fixed cost (its
// phases, the goroutines' stacks: 64 clients' worth of gRPC streams) that a
// small collected heap does not pay back: with Go's 4 MiB, a store whose
// own heap was ~8 MiB beside 32 MiB of pebble's memory ran a cycle every
// few thousand single-key reads, and range@64 took 30 % more CPU a request
// than unpaced (docs/benchmarks.md, 6 December 12:50). 16 MiB halves those
// cycles and stays below the collected heap of a loaded store (~20 MiB at
// 100,000 keys), where the pacing saves the most (ADR 013).
const minHeadroom = 16 << 20

// Heap is what one GC cycle found, from runtime/metrics.
type Heap struct {
	// Live is the heap marked live by the last cycle (/gc/heap/live:bytes).
	Live uint64
	// Stacks and Globals are the scannable stack and global bytes, which
	// Go's goal adds to Live before it applies GOGC.
	Stacks, Globals uint64
}

// Percent returns the GOGC that gives a heap of h, of which engine bytes
// are the engine's, the goal base gives its collected part alone, with a
// headroom of at least busy bytes (0 while the process is not busy,
// busyFloor); within [1, base].
func Percent(base int, h Heap, engine, busy uint64) int {
	total := h.Live + h.Stacks + h.Globals
	if base <= 0 || total == 0 {
		return base
	}
	engine = min(engine, h.Live)
	headroom := float64(total-engine) * float64(base) / 100
	headroom = max(headroom, float64(minHeadroom)*float64(base)/100, float64(busy))
	p := int(math.Ceil(headroom * 100 / float64(total)))
	return max(1, min(p, base))
}

// Pacer sets GOGC after every GC cycle (see the package comment).
type Pacer struct {
	base    int
	window  time.Duration
	engine  func() uint64
	log     *slog.Logger
	cycles  chan struct{}
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
	samples []metrics.Sample
}

// Start paces the GC until Stop, on the GOGC in effect (GOGC from the
// environment, 100 by default). engine returns the engine's bytes in the Go
// heap at the moment. window is the busy floor's (busy.go; 0: none). With
// GOGC off (GOGC=off) nothing is paced.
func Start(engine func() uint64, window time.Duration, log *slog.Logger) *Pacer {
	p := &Pacer{
		engine: engine, window: window, log: log,
		cycles: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{}),
		samples: []metrics.Sample{
			{Name: "/gc/gogc:percent"}, {Name: "/gc/heap/live:bytes"},
			{Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
			{Name: "/gc/heap/allocs:bytes"},
		},
	}
	metrics.Read(p.samples)
	p.base = int(p.samples[sampleGOGC].Value.Uint64()) // off (-1) reads back as -1
	if p.base <= 0 {
		log.Info("GOGC is off: the GC is not paced")
		close(p.stopped)
		return p
	}
	armCycleSignal(p.cycles, p.done)
	go p.run()
	return p
}

// Stop ends the pacing and restores the starting GOGC. It may be called
// more than once.
func (p *Pacer) Stop() {
	p.once.Do(func() {
		close(p.done)
		<-p.stopped
		if p.base > 0 {
			debug.SetGCPercent(p.base)
		}
	})
}

func (p *Pacer) run() {
	defer close(p.stopped)
	current := p.base
	var tick <-chan time.Time
	if p.window > 0 {
		t := time.NewTicker(busyTick)
		defer t.Stop()
		tick = t.C
	}
	metrics.Read(p.samples)
	busy := busyMeter{window: p.window, allocs: p.samples[sampleAllocs].Value.Uint64(), at: time.Now()}
	for {
		release := false
		select {
		case <-p.done:
			return
		case <-p.cycles:
			metrics.Read(p.samples)
		case now := <-tick:
			metrics.Read(p.samples)
			release = busy.measure(p.samples[sampleAllocs].Value.Uint64(), now)
		}
		h := Heap{Live: p.samples[sampleLive].Value.Uint64(), Stacks: p.samples[sampleStacks].Value.Uint64(), Globals: p.samples[sampleGlobals].Value.Uint64()}
		if want := Percent(p.base, h, p.engine(), busy.floor); want != current {
			debug.SetGCPercent(want)
			p.log.Debug("GC paced", "gogc", want, "live", h.Live, "busy_floor", busy.floor)
			current = want
		}
		if release {
			// The load that raised the floor is over: collect its garbage
			// and give the pages back now, not at the scavenger's pace.
			debug.FreeOSMemory()
			p.log.Debug("GC floor back to its least after a busy spell; memory returned to the OS")
		}
	}
}

// The runtime/metrics samples a Pacer reads, in the order Start lists them.
const (
	sampleGOGC = iota
	sampleLive
	sampleStacks
	sampleGlobals
	sampleAllocs
)

// cycleToken is an object that becomes garbage as soon as it is made; its
// cleanup runs after the GC cycle that reclaimed it. It holds a pointer so
// that it is not combined with other objects by the tiny allocator (whose
// blocks may outlive it).
type cycleToken struct {
	_ *byte
	_ [8]byte
}

// armCycleSignal makes a token whose cleanup signals cycles (without
// blocking) and arms the next one, until done is closed.
func armCycleSignal(cycles chan<- struct{}, done <-chan struct{}) {
	runtime.AddCleanup(new(cycleToken), func(struct{}) {
		select {
		case <-done:
			return
		default:
		}
		select {
		case cycles <- struct{}{}:
		default:
		}
		armCycleSignal(cycles, done)
	}, struct{}{})
}
