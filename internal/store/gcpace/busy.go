package gcpace

import "time"

// The busy floor. The pacer's least headroom (minHeadroom) suits a store at
// rest: its memory is what a control-plane node pays all the time. Under a
// heavy load the same 16 MiB fill many times a second, and each cycle's
// fixed costs (its phases, the stacks of every gRPC worker) are paid that
// often: put@64 spent ~10 % more CPU a request paced than unpaced (ADR 013).
// So while the process allocates fast the headroom is at least what it
// allocated in the last window (a cycle at most about once a window), never
// more than the starting GOGC gives the whole heap (Percent's cap: never
// more than unpaced). When the allocation rate falls back to nearly
// nothing, the floor drops and the pacer returns the pages the busy spell
// used to the OS at once (debug.FreeOSMemory): a store at rest holds what
// it needs, not what its last burst did.

// busyTick is how often the allocation rate is measured.
const busyTick = time.Second

// quietBytes is what a second's allocations stay under for the process to
// count as at rest. A store whose background traffic never falls under it
// keeps a spell's pages until Go's scavenger returns them, as every store
// did before this floor; its GOGC still falls back with the rate.
const quietBytes = 4 << 20

// busyMeter measures the allocation rate and turns it into a floor.
type busyMeter struct {
	// window is the least time between cycles the floor aims at.
	window time.Duration
	// allocs and at are the cumulative bytes allocated at the last measure.
	allocs uint64
	at     time.Time
	// floor is the headroom the last measure asks for, in bytes (0 while
	// it is under minHeadroom, which applies anyway).
	floor uint64
	// spell is set once the floor rose and cleared when the process is at
	// rest again: the pages of a spell are returned once.
	spell bool
}

// measure takes the cumulative bytes allocated at now and sets the floor to
// what was allocated in one window at the rate since the last measure. It
// reports whether the process is at rest (under quietBytes a second) for
// the first time since the floor last rose above minHeadroom, when the busy
// spell's memory should go back to the OS.
func (b *busyMeter) measure(allocs uint64, now time.Time) (release bool) {
	elapsed := now.Sub(b.at)
	if elapsed <= 0 || allocs < b.allocs {
		return false
	}
	perSecond := float64(allocs-b.allocs) / elapsed.Seconds()
	b.allocs, b.at = allocs, now
	b.floor = uint64(perSecond * b.window.Seconds())
	if b.floor <= minHeadroom {
		b.floor = 0
	}
	if b.floor > 0 {
		b.spell = true
	}
	if b.spell && perSecond < quietBytes {
		b.spell = false
		return true
	}
	return false
}
