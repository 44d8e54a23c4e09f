package mvcc

import "github.com/cockroachdb/pebble/v2"

// How pebble compacts its levels (ADR 014; measured in docs/benchmarks.md).
//
// A key's history entries sit side by side, ordered by key and then by
// revision (keys.go): a flushed memtable holds new versions of keys whose
// older versions are already in the base level, so every L0 compaction
// rewrites, with the new entries, every older version of the keys it
// touches. With pebble's default of compacting L0 as soon as it holds 4
// sublevels, 400,000 puts of 1 KiB over 100,000 random keys rewrote the
// base level 10× (857 MB written for 85 MB in); waiting for 16 sublevels
// rewrote it 2.4× (170 MB), and the store's CPU for those puts fell by
// ~38 % (13.8 → 8.6 s), sequential keys alike (write amplification of the
// base level 7.1 → 2.8). The cost is read amplification in L0: a point read
// consults each sublevel's bloom filter, a scan merges them (100k gets took
// the same time; a scan of the 100k keys ~5 % longer).
const (
	// DefaultL0CompactionThreshold is the number of L0 sublevels at which
	// pebble compacts L0 into the base level (pebble's default: 4).
	DefaultL0CompactionThreshold = 16
	// MaxL0CompactionThreshold bounds the option: past it a point read
	// checks too many filters and a stop of writes comes too late.
	MaxL0CompactionThreshold = 64
	// l0StopWritesFactor sets pebble's L0StopWritesThreshold (writes wait
	// while L0 has that many sublevels) as a multiple of the compaction
	// threshold: writes stall only when compactions fall far behind, as
	// under pebble's defaults (4 and 12).
	l0StopWritesFactor = 4
)

// pebbleLevelOptions sets when pebble compacts L0.
func pebbleLevelOptions(popts *pebble.Options, opts Options) {
	popts.L0CompactionThreshold = opts.L0CompactionThreshold
	popts.L0StopWritesThreshold = l0StopWritesFactor * opts.L0CompactionThreshold
}
