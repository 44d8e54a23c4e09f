package store

import (
	"fmt"
	"log/slog"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// minMemoryFlagBytes is the smallest --cache-bytes and --memtable-bytes
// accepted: below it pebble flushes or evicts all the time.
const minMemoryFlagBytes = 1 << 20

// validateEngine checks the engine's flags (memory, compaction). Zero means
// the default (as in mvcc.Options), so a Config built in code need not set
// them.
func (c *Config) validateEngine() error {
	if c.CacheBytes != 0 && c.CacheBytes < minMemoryFlagBytes {
		return fmt.Errorf("--cache-bytes %d is below 1 MiB; pass at least %d (default %d)", c.CacheBytes, minMemoryFlagBytes, mvcc.DefaultCacheSize)
	}
	if c.MemTableBytes != 0 && (c.MemTableBytes < minMemoryFlagBytes || c.MemTableBytes > mvcc.MaxMemTableSize) {
		return fmt.Errorf("--memtable-bytes %d is out of range; pass %d to %d (default %d)", c.MemTableBytes, minMemoryFlagBytes, int64(mvcc.MaxMemTableSize), mvcc.DefaultMemTableSize)
	}
	if c.L0CompactionThreshold != 0 && (c.L0CompactionThreshold < 2 || c.L0CompactionThreshold > mvcc.MaxL0CompactionThreshold) {
		return fmt.Errorf("--l0-compaction-threshold %d is out of range; pass 2 to %d (default %d)", c.L0CompactionThreshold, mvcc.MaxL0CompactionThreshold, mvcc.DefaultL0CompactionThreshold)
	}
	if c.MemoryLimitBytes < 0 {
		return fmt.Errorf("--memory-limit-bytes %d is negative; pass 0 (no limit) or a size in bytes", c.MemoryLimitBytes)
	}
	if c.GCBusyWindow < 0 {
		return fmt.Errorf("--gc-busy-window %s is negative; pass 0 (the 16 MiB floor alone) or a duration such as 250ms", c.GCBusyWindow)
	}
	return nil
}

// storeOptions are the engine's options from the flags.
func (c *Config) storeOptions(log *slog.Logger) mvcc.Options {
	return mvcc.Options{
		NoSync: c.UnsafeNoFsync, Logger: log, Replicated: c.Clustered(),
		CacheSize: c.CacheBytes, MemTableSize: c.MemTableBytes,
		L0CompactionThreshold: c.L0CompactionThreshold,
	}
}
