package pebbleprobe

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// keys is the size of the key space, as the benchmark's key-space workload.
const keys = 100000

// open creates a pebble DB with the store's options (internal/store/mvcc
// Open: 64 MiB memtable, newest format), the given block cache, optionally
// bloom filters on every level, and loads the store's layout for `keys` keys
// of 1 KiB: a live entry l/<key> and a history entry h/<key> each holding
// the value (liveSize bytes of it in the live entry: 1024 as the store
// does today, or ~48 for a live entry holding only metadata). It compacts everything out of the memtable, as a store in
// steady state, with a warm cache.
func open(b *testing.B, cache int64, filters bool, liveSize int) *pebble.DB {
	b.Helper()
	opts := &pebble.Options{Cache: pebble.NewCache(cache), MemTableSize: 64 << 20, FormatMajorVersion: pebble.FormatNewest}
	defer opts.Cache.Unref()
	if filters {
		for i := range opts.Levels {
			opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		}
	}
	db, err := pebble.Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	val := make([]byte, 1024)
	batch := db.NewBatch()
	for i := 0; i < keys; i++ {
		_, _ = rand.Read(val)
		_ = batch.Set([]byte(fmt.Sprintf("l/registry/bench/keyspace/%08d", i)), val[:liveSize], nil)
		_ = batch.Set([]byte(fmt.Sprintf("h/registry/bench/keyspace/%08d\x00\x01%08d", i, i)), val, nil)
		if batch.Len() > 16<<20 {
			if err := batch.Commit(pebble.NoSync); err != nil {
				b.Fatal(err)
			}
			batch = db.NewBatch()
		}
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		b.Fatal(err)
	}
	if err := db.Compact(context.Background(), []byte("a"), []byte("z"), true); err != nil {
		b.Fatal(err)
	}
	// Warm the block cache with one pass over the live entries, as a running
	// store's cache is warm.
	for i := 0; i < keys; i++ {
		if _, closer, err := db.Get([]byte(fmt.Sprintf("l/registry/bench/keyspace/%08d", i))); err == nil {
			closer.Close()
		}
	}
	return db
}

// BenchmarkLiveLookup is the committer's writeTxn.live for a create (the key
// is absent) and for an update (present): the store's options today
// (64 MiB cache, 1 KiB value in the live entry), with bloom filters, with a
// 512 MiB cache, and with live entries that hold only metadata.
func BenchmarkLiveLookup(b *testing.B) {
	variants := []struct {
		name     string
		cache    int64
		filters  bool
		liveSize int
	}{
		{"today(cache=64MiB,live=1KiB)", 64 << 20, false, 1024},
		{"bloom", 64 << 20, true, 1024},
		{"cache=512MiB", 512 << 20, false, 1024},
		{"live=metadata-only", 64 << 20, false, 48},
	}
	for _, v := range variants {
		db := open(b, v.cache, v.filters, v.liveSize)
		b.Run(v.name+"/absent", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_, _, err := db.Get([]byte(fmt.Sprintf("l/registry/bench/keyspace/%08dx", i%keys)))
				if err != pebble.ErrNotFound {
					b.Fatalf("get of an absent key: %v", err)
				}
			}
		})
		b.Run(v.name+"/present", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_, closer, err := db.Get([]byte(fmt.Sprintf("l/registry/bench/keyspace/%08d", (i*7919)%keys)))
				if err != nil {
					b.Fatal(err)
				}
				closer.Close()
			}
		})
	}
}
