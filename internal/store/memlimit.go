package store

import (
	"log/slog"
	"runtime/debug"
)

// applyMemoryLimit sets Go's soft memory limit (--memory-limit-bytes) when
// one is given; 0 leaves the runtime's own (GOMEMLIMIT from the environment,
// or none). The limit covers the Go runtime's memory only: with cgo,
// pebble's memtables and cached blocks are C allocations outside it; without
// cgo they are Go heap and inside it. It is soft: past it the GC runs more
// often (at most about half the CPU) rather than failing allocations.
func applyMemoryLimit(limit int64, log *slog.Logger) {
	if limit <= 0 {
		return
	}
	prev := debug.SetMemoryLimit(limit)
	log.Info("Go soft memory limit set", "bytes", limit, "was", prev)
}
