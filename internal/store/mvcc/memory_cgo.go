//go:build cgo

package mvcc

// engineMemoryInGoHeap: with cgo, pebble's manual allocator (memtables,
// cached blocks) uses C's calloc, outside the Go heap.
const engineMemoryInGoHeap = false
