package mvcc

// MemoryStats is what the store's engine holds in memory outside the live-key
// index, from pebble's own metrics. With cgo, pebble allocates memtables and
// cached blocks with C malloc (outside the Go heap: they are in RSS but not in
// runtime/metrics' heap figures); without cgo the same bytes are Go heap
// allocations.
type MemoryStats struct {
	// BlockCacheBytes is the size of the blocks in the block cache; it never
	// exceeds BlockCacheCapacity.
	BlockCacheBytes    int64
	BlockCacheCapacity int64
	// MemTableBytes is the allocated size of the mutable memtable plus those
	// queued for flushing; each is allocated whole (Options.MemTableSize),
	// though with cgo only the pages written are resident.
	MemTableBytes uint64
	MemTableCount int64
	// ZombieMemTableBytes are flushed memtables still pinned by an open
	// iterator or snapshot read.
	ZombieMemTableBytes uint64
	// IndexKeys is the number of keys in the live-key index (about 70 bytes
	// plus the key each: ADR 009).
	IndexKeys int
}

// MemoryStats returns the engine's memory figures of the moment.
func (s *Store) MemoryStats() MemoryStats {
	m := s.db.Metrics()
	return MemoryStats{
		BlockCacheBytes:     m.BlockCache.Size,
		BlockCacheCapacity:  s.opts.CacheSize,
		MemTableBytes:       m.MemTable.Size,
		MemTableCount:       m.MemTable.Count,
		ZombieMemTableBytes: m.MemTable.ZombieSize,
		IndexKeys:           s.idx.len(),
	}
}

// EngineHeapBytes returns the bytes of the Go heap that pebble manages by
// hand — its memtables (with the one kept for reuse) and cached blocks —
// which are Go heap only in a build without cgo; 0 with cgo. Go's GC cannot
// reclaim them before pebble frees them (package gcpace paces the GC
// without them).
func (s *Store) EngineHeapBytes() uint64 {
	if !engineMemoryInGoHeap {
		return 0
	}
	m := s.MemoryStats()
	return uint64(m.BlockCacheBytes) + m.MemTableBytes + m.ZombieMemTableBytes
}
