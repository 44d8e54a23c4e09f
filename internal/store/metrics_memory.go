package store

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// memoryCollector exports the engine's memory (mvcc.MemoryStats) beside Go's
// own collector, so that RSS can be split into Go heap, memtables and block
// cache from /metrics alone. One pebble Metrics call per scrape.
type memoryCollector struct {
	st                                      *mvcc.Store
	cache, cacheCap, mem, memN, zombie, idx *prometheus.Desc
}

func newMemoryCollector(st *mvcc.Store) *memoryCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("quantykube_store_"+name, help, nil, nil)
	}
	return &memoryCollector{
		st:       st,
		cache:    d("block_cache_bytes", "Bytes of blocks in pebble's block cache."),
		cacheCap: d("block_cache_capacity_bytes", "Capacity of pebble's block cache (--cache-bytes)."),
		mem:      d("memtable_bytes", "Allocated bytes of pebble's memtables, the mutable one and those queued for flushing."),
		memN:     d("memtables", "Number of pebble's memtables, the mutable one and those queued for flushing."),
		zombie:   d("memtable_zombie_bytes", "Bytes of flushed memtables still pinned by a reader."),
		idx:      d("live_index_keys", "Keys in the in-memory index of live keys."),
	}
}

func (c *memoryCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.cache, c.cacheCap, c.mem, c.memN, c.zombie, c.idx} {
		ch <- d
	}
}

func (c *memoryCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.st.MemoryStats()
	g := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	g(c.cache, float64(m.BlockCacheBytes))
	g(c.cacheCap, float64(m.BlockCacheCapacity))
	g(c.mem, float64(m.MemTableBytes))
	g(c.memN, float64(m.MemTableCount))
	g(c.zombie, float64(m.ZombieMemTableBytes))
	g(c.idx, float64(m.IndexKeys))
}
