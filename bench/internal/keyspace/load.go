// Package keyspace measures a store with a big key space through the etcd v3
// API, in the shapes kube-apiserver uses: create and update as compare-and-
// swap transactions on mod_revision, lists as pages at the first page's
// revision, RangeStream, and compaction.
package keyspace

import (
	"context"
	"crypto/rand"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Prefix is where the key space lives; keys are Prefix + an 8-digit index.
const Prefix = "/registry/bench/keyspace/"

// Key returns the i-th key.
func Key(i int) string { return fmt.Sprintf("%s%08d", Prefix, i) }

// WriteStats describes one pass of writes.
type WriteStats struct {
	Count    int
	Elapsed  time.Duration
	P50, P99 time.Duration
}

// PerSecond is the write throughput.
func (w WriteStats) PerSecond() float64 { return float64(w.Count) / w.Elapsed.Seconds() }

// Create writes n keys of valueSize random bytes with `workers` concurrent
// clients, each as the transaction kube-apiserver sends for a create
// (If mod_revision(k)==0 Then Put). It returns each key's mod revision.
func Create(ctx context.Context, c *clientv3.Client, n, valueSize, workers int) (WriteStats, []int64, error) {
	revs := make([]int64, n)
	st, err := parallel(ctx, n, workers, func(ctx context.Context, i int, val []byte) error {
		k := Key(i)
		resp, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, string(val))).Commit()
		if err != nil {
			return fmt.Errorf("create %s: %w", k, err)
		}
		if !resp.Succeeded {
			return fmt.Errorf("create %s: key exists already", k)
		}
		revs[i] = resp.Header.Revision
		return nil
	}, valueSize)
	return st, revs, err
}

// Update rewrites every key once, as kube-apiserver's GuaranteedUpdate does
// (If mod_revision(k)==R Then Put Else Get), with the revisions Create returned.
func Update(ctx context.Context, c *clientv3.Client, revs []int64, valueSize, workers int) (WriteStats, error) {
	return parallel(ctx, len(revs), workers, func(ctx context.Context, i int, val []byte) error {
		k := Key(i)
		resp, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", revs[i])).
			Then(clientv3.OpPut(k, string(val))).Else(clientv3.OpGet(k)).Commit()
		if err != nil {
			return fmt.Errorf("update %s: %w", k, err)
		}
		if !resp.Succeeded {
			return fmt.Errorf("update %s: mod revision moved from %d", k, revs[i])
		}
		revs[i] = resp.Header.Revision
		return nil
	}, valueSize)
}

// parallel runs op for i in [0,n) on `workers` goroutines and measures it.
func parallel(ctx context.Context, n, workers int, op func(context.Context, int, []byte) error, valueSize int) (WriteStats, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	lat := make([]time.Duration, n)
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			val := make([]byte, valueSize)
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				_, _ = rand.Read(val)
				t := time.Now()
				if err := op(ctx, i, val); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	st := WriteStats{Count: n, Elapsed: time.Since(start)}
	if firstErr != nil {
		return st, firstErr
	}
	st.P50, st.P99 = Percentile(lat, 0.50), Percentile(lat, 0.99)
	return st, nil
}

// Percentile returns the q-quantile of d (sorting a copy).
func Percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	i := int(q*float64(len(s)-1) + 0.5)
	return s[i]
}
