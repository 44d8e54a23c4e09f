package mvcc

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func TestPebbleMemoryOptions(t *testing.T) {
	var popts pebble.Options
	c := pebbleMemoryOptions(&popts, Options{CacheSize: 8 << 20, MemTableSize: 4 << 20})
	defer c.Unref()
	if popts.MemTableSize != 4<<20 || popts.MemTableStopWritesThreshold != memTableStopWrites {
		t.Fatalf("memtable %d, stop-writes %d", popts.MemTableSize, popts.MemTableStopWritesThreshold)
	}
	if got, want := c.MaxSize(), int64(8<<20+3*(4<<20)); got != want {
		t.Fatalf("pebble cache capacity %d, want %d (blocks plus 3 memtables)", got, want)
	}
}

// The block cache must hold blocks once memtables are allocated: pebble
// reserves memtables from it, and with the sizes before (64 MiB memtables in
// a 64 MiB cache) it stayed empty however much was read.
func TestBlockCacheHoldsBlocksBesideMemtables(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoSync: true, CacheSize: 4 << 20, MemTableSize: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := strings.Repeat("v", 1024)
	for i := 0; i < 5000; i++ {
		put(t, s, fmt.Sprintf("/k/%06d", i), v+fmt.Sprint(i))
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	// The flushed table is compacted down in the background, and pebble
	// drops a deleted table's blocks from the cache: a range racing that
	// compaction leaves the cache empty (2 runs in 10 here, once in CI).
	// Compact everything first, so the blocks read belong to tables that stay.
	if err := s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Range(context.Background(), &pb.RangeRequest{Key: []byte("/k/"), RangeEnd: []byte("/k0")}); err != nil {
		t.Fatal(err)
	}
	m := s.MemoryStats()
	if m.BlockCacheBytes == 0 || m.BlockCacheCapacity != 4<<20 || m.IndexKeys != 5000 {
		t.Fatalf("after a full range: %+v; want blocks cached, capacity 4 MiB, 5000 keys", m)
	}
	if m.MemTableBytes > 2<<20 {
		t.Fatalf("memtables %d bytes, above --memtable-bytes", m.MemTableBytes)
	}
	// Without cgo those bytes are Go heap, and the GC's pacing leaves them
	// out (package gcpace); with cgo they are C memory and not reported.
	got, want := s.EngineHeapBytes(), uint64(0)
	if engineMemoryInGoHeap {
		want = uint64(m.BlockCacheBytes) + m.MemTableBytes + m.ZombieMemTableBytes
	}
	if got != want && (want == 0 || got == 0) {
		t.Fatalf("EngineHeapBytes %d, want %d (engine memory in the Go heap: %v)", got, want, engineMemoryInGoHeap)
	}
}
