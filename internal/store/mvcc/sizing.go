package mvcc

import "github.com/cockroachdb/pebble/v2"

// Memory sizing of pebble (ADR 001, "Memory"; measured in docs/benchmarks.md,
// "Issue #15: memory sized from measurements").
const (
	// DefaultCacheSize is the block cache for sstable blocks, in bytes.
	DefaultCacheSize = 16 << 20
	// DefaultMemTableSize is the size of one memtable, in bytes. 8 MiB since
	// a value is written once (format 2, ADR 011): a memtable takes as many
	// writes as a 16 MiB one did before, and pebble holds up to three
	// (after loading 100,000 keys of 1 KiB: RSS 94 → 79 MiB, the same CPU).
	DefaultMemTableSize = 8 << 20
	// MaxMemTableSize is pebble's upper bound on a memtable (its arena
	// offsets are 32-bit).
	MaxMemTableSize = 4<<30 - 1
	// memTableStopWrites is pebble's MemTableStopWritesThreshold: writes
	// wait while this many memtables (the mutable one and those queued for
	// flushing) are full.
	memTableStopWrites = 2
	// memTablesReserved is the most memtables pebble holds at once: the
	// stop-writes threshold plus the flushed one it keeps for reuse.
	memTablesReserved = memTableStopWrites + 1
)

// pebbleCacheSize is the capacity to give pebble's cache so that blocks get
// cache bytes of it. Pebble reserves every memtable it allocates from the
// block cache (DB.newMemTable: Cache.Reserve), including the one it keeps
// for reuse; a cache no larger than that reservation holds no block at all.
// That was the case before this sizing (64 MiB memtables, a 64 MiB cache:
// block cache empty under every workload, every read a pread).
//
// Invariant: pebble's manual memory (memtables plus cached blocks) stays
// within pebbleCacheSize(cache, memtable), except for batches larger than
// half a memtable, which pebble turns into flushable memtables of their
// own size.
func pebbleCacheSize(cache, memtable int64) int64 {
	return cache + memTablesReserved*memtable
}

// pebbleMemoryOptions sets the memory-related fields of popts from opts; the
// returned cache must be released (Unref) once pebble.Open returned.
func pebbleMemoryOptions(popts *pebble.Options, opts Options) *pebble.Cache {
	c := pebble.NewCache(pebbleCacheSize(opts.CacheSize, opts.MemTableSize))
	popts.Cache = c
	popts.MemTableSize = uint64(opts.MemTableSize)
	popts.MemTableStopWritesThreshold = memTableStopWrites
	return c
}
