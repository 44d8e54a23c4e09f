package mvcc

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// How pebble lays out its tables (measured in docs/benchmarks.md, "Issue
// #15: a value stored once"; ADR 011).
const (
	// tableBlockSize is the target size of a table's data blocks. A value
	// is read from its history entry, and the history holds every version
	// of a key side by side, so a list reads more blocks than the live
	// values alone fill; each block read is a lookup in the block cache
	// and, on a miss, a pread, an allocation and a checksum. pebble's
	// default, 4 KiB, holds three 1 KiB values: a paged list of 100,000
	// such keys read ~50,000 blocks. 32 KiB blocks made that list 1.5–2.5×
	// faster (medians 1.74 s → 0.68 s at load 7) and cut the CPU of
	// loading the keys by a quarter; 64 KiB was slower than 32 KiB.
	tableBlockSize = 32 << 10
	// bloomBitsPerKey sizes each table's bloom filter (1 % false
	// positives at 10 bits): a point lookup — a single-key read's history
	// entry, the committer's reads of values — skips the tables that do
	// not hold its key. ~1.25 bytes of filter per entry.
	bloomBitsPerKey = 10
)

// pebbleTableOptions sets the table layout of every level.
func pebbleTableOptions(popts *pebble.Options) {
	for i := range popts.Levels {
		popts.Levels[i].BlockSize = tableBlockSize
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(bloomBitsPerKey)
	}
}
