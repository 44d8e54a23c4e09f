//go:build !cgo

package mvcc

// engineMemoryInGoHeap: without cgo, pebble's manual allocator (memtables,
// cached blocks) falls back to Go's make, so those bytes are Go heap.
const engineMemoryInGoHeap = true
