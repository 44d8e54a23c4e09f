package storemove

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// bumpKey is the key undo writes to raise etcd's revision past the store's.
const bumpKey = "/quantykube/revision-bump"

// bumpWorkers is how many puts raiseEtcd keeps in flight: etcd commits
// concurrent proposals together, so the rate grows with them.
const bumpWorkers = 64

// raiseEtcd raises etcd's revision to at least target with puts of bumpKey,
// one revision each (etcd has no other way to skip revisions while it
// serves), and returns etcd's revision and how many puts it took.
func raiseEtcd(ctx context.Context, etcd *clientv3.Client, target int64) (rev, puts int64, err error) {
	resp, err := etcd.Get(ctx, bumpKey)
	if err != nil {
		return 0, 0, fmt.Errorf("read etcd's revision: %w", err)
	}
	var cur, n atomic.Int64
	cur.Store(resp.Header.Revision)
	var wg sync.WaitGroup
	errc := make(chan error, bumpWorkers)
	for range bumpWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cur.Load() < target {
				r, err := etcd.Put(ctx, bumpKey, "")
				if err != nil {
					errc <- fmt.Errorf("raise etcd's revision: %w", err)
					return
				}
				n.Add(1)
				for c := cur.Load(); r.Header.Revision > c && !cur.CompareAndSwap(c, r.Header.Revision); c = cur.Load() {
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return cur.Load(), n.Load(), err
	}
	return cur.Load(), n.Load(), nil
}

// sealEtcd ends etcd's revision strictly above storeRev and compacts it
// there: no client holds a resourceVersion etcd has not passed, and one that
// resumes a watch from a store-era resourceVersion gets 410 and relists.
// It returns etcd's final revision.
func sealEtcd(ctx context.Context, etcd *clientv3.Client, storeRev int64) (int64, error) {
	if _, _, err := raiseEtcd(ctx, etcd, storeRev); err != nil {
		return 0, err
	}
	// The delete takes one more revision: etcd ends above storeRev.
	d, err := etcd.Delete(ctx, bumpKey)
	if err != nil {
		return 0, fmt.Errorf("delete %s: %w", bumpKey, err)
	}
	final := d.Header.Revision
	if d.Deleted == 0 {
		// Nothing to delete took no revision: take one.
		p, err := etcd.Put(ctx, bumpKey, "")
		if err != nil {
			return 0, fmt.Errorf("raise etcd's revision: %w", err)
		}
		if d, err = etcd.Delete(ctx, bumpKey); err != nil {
			return 0, fmt.Errorf("delete %s: %w", bumpKey, err)
		}
		final = max(p.Header.Revision, d.Header.Revision)
	}
	if _, err := etcd.Compact(ctx, final, clientv3.WithCompactPhysical()); err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrCompacted) {
		return 0, fmt.Errorf("compact etcd at %d: %w", final, err)
	}
	return final, nil
}
