package storee2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestReadYourWrites checks that reads are linearizable with acknowledged
// writes: once a put is acknowledged at revision R, a read on another
// connection answers at a revision >= R and sees the put (or a later write).
// Concurrent writers keep group commit busy while it is checked.
func TestReadYourWrites(t *testing.T) {
	s := startServer(t, serverOptions{})
	writer, reader := s.Client(), s.Client()
	defer writer.Close()
	defer reader.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const goroutines = 8
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	checks := 0
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				key := fmt.Sprintf("ryw/%d/%d", g, i%16)
				val := fmt.Sprintf("g%d-%d", g, i)
				p, err := writer.Put(ctx, key, val)
				if err != nil {
					t.Errorf("put %s: %v", key, err)
					return
				}
				r, err := reader.Get(ctx, key)
				if err != nil {
					t.Errorf("get %s: %v", key, err)
					return
				}
				if r.Header.Revision < p.Header.Revision || len(r.Kvs) != 1 || r.Kvs[0].ModRevision < p.Header.Revision ||
					(r.Kvs[0].ModRevision == p.Header.Revision && string(r.Kvs[0].Value) != val) {
					t.Errorf("put %s=%s acknowledged at revision %d, then a read on another connection answered at revision %d with %v: a stale read",
						key, val, p.Header.Revision, r.Header.Revision, r.Kvs)
					return
				}
				// A range over everything is at least as new, too.
				all, err := reader.Get(ctx, "ryw/", clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil || all.Header.Revision < p.Header.Revision {
					t.Errorf("count ryw/ after a put at %d: revision %v, %v", p.Header.Revision, all, err)
					return
				}
				mu.Lock()
				checks++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d acknowledged puts were visible to the next read on another connection", checks)
}
