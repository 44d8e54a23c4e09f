package keyspace

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ListWriteStats is what WritesDuringLists measured.
type ListWriteStats struct {
	Writes   WriteStats
	Lists    int           // full paged lists completed
	ListMean time.Duration // their mean time
}

// ListPause is the lister's pause between two full lists: a cluster whose
// informers relist, or a controller that lists in a loop, asks the store for
// the whole key space about this often.
const ListPause = 10 * time.Millisecond

// WritesDuringLists measures the writes a store takes while one client lists
// the whole key space (pages of pageSize, as kube-apiserver pages) again and
// again, ListPause apart: `workers` writers update keys of the key space as
// GuaranteedUpdate does (If mod_revision(k)==R Then Put Else Get) for d.
// revs are the keys' mod revisions (Create's), kept current; writer w owns
// the keys i ≡ w (mod workers), so no two writers race for a key. A store
// whose lists starve its writers shows it here.
func WritesDuringLists(ctx context.Context, c *clientv3.Client, revs []int64, valueSize, workers int, pageSize int64, d time.Duration) (ListWriteStats, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
		stopped  atomic.Bool
		st       ListWriteStats
		listSum  time.Duration
	)
	fail := func(err error) { once.Do(func() { firstErr = err; cancel() }) }
	wg.Add(1)
	go func() { // the lister
		defer wg.Done()
		for !stopped.Load() && ctx.Err() == nil {
			t, err := PagedRange(ctx, c, pageSize, len(revs))
			if err != nil {
				if ctx.Err() == nil {
					fail(fmt.Errorf("list while writing: %w", err))
				}
				return
			}
			st.Lists++
			listSum += t
			time.Sleep(ListPause)
		}
	}()
	lats := make([][]time.Duration, workers)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			val := make([]byte, valueSize)
			for i := w; !stopped.Load() && ctx.Err() == nil; i += workers {
				if i >= len(revs) {
					i = w
				}
				k := Key(i)
				_, _ = rand.Read(val)
				t := time.Now()
				resp, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", revs[i])).
					Then(clientv3.OpPut(k, string(val))).Else(clientv3.OpGet(k)).Commit()
				if err != nil {
					if ctx.Err() == nil {
						fail(fmt.Errorf("update %s while listing: %w", k, err))
					}
					return
				}
				if !resp.Succeeded {
					fail(fmt.Errorf("update %s while listing: mod revision moved from %d", k, revs[i]))
					return
				}
				revs[i] = resp.Header.Revision
				lats[w] = append(lats[w], time.Since(t))
			}
		}()
	}
	time.Sleep(d)
	stopped.Store(true)
	elapsed := time.Since(start)
	wg.Wait()
	if firstErr != nil {
		return st, firstErr
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	st.Writes = WriteStats{Count: len(all), Elapsed: elapsed, P50: Percentile(all, 0.50), P99: Percentile(all, 0.99)}
	if st.Lists > 0 {
		st.ListMean = listSum / time.Duration(st.Lists)
	}
	return st, nil
}
