package store

import (
	"log/slog"

	"github.com/quantyroot/quantykube/internal/store/gcpace"
	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// paceGC starts pacing Go's GC without the engine's memory
// (--gc-exclude-engine-memory, package gcpace), with a floor while busy
// (--gc-busy-window), and returns what stops it,
// which must run before st closes; it may run more than once.
func paceGC(cfg Config, st *mvcc.Store, log *slog.Logger) (stop func()) {
	if !cfg.GCExcludeEngineMemory {
		return func() {}
	}
	return gcpace.Start(st.EngineHeapBytes, cfg.GCBusyWindow, log).Stop
}
