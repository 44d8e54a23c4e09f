package store

import (
	"log/slog"
	"runtime/debug"

	"github.com/quantyroot/quantykube/internal/store/gcpace"
	"github.com/quantyroot/quantykube/internal/store/mvcc"
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

// paceGC starts pacing Go's GC without the engine's memory
// (--gc-exclude-engine-memory, package gcpace) and returns what stops it,
// which must run before st closes; it may run more than once.
func paceGC(cfg Config, st *mvcc.Store, log *slog.Logger) (stop func()) {
	if !cfg.GCExcludeEngineMemory {
		return func() {}
	}
	return gcpace.Start(st.EngineHeapBytes, log).Stop
}
