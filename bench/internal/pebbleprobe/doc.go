// Package pebbleprobe holds micro-benchmarks that test, on pebble alone, the
// fixes docs/benchmarks.md proposes for the store's hot paths (the store's
// code is not changed here): the point lookup the committer does for every
// write, with the store's pebble options, with and without bloom filters and
// with a larger block cache. Run: go test -run x -bench . ./bench/internal/pebbleprobe
package pebbleprobe
