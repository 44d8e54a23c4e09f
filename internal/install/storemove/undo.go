package storemove

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/systemd"
)

// bumpKey is the key undo writes to raise etcd's revision past the store's.
const bumpKey = "/quantykube/revision-bump"

// UndoStats describe an undo.
type UndoStats struct {
	StoreRevision int64
	Puts, Deletes int64
	Bumped        int64
	EtcdRevision  int64
}

// Undo moves the API server back from the store onto etcd.
func (m *Mover) Undo(ctx context.Context, dryRun bool) error {
	if dryRun {
		m.subject().DryRun(ctx, "undo")
		return nil
	}
	defer m.closeAll()
	ran, err := m.subject().Execute(ctx, "undo")
	if err != nil || !ran {
		return err
	}
	fmt.Fprintf(m.Out, "undone: the API server runs on etcd again (%s); API-server downtime %v; the store's data is kept in %s\n",
		m.endpoint, m.Downtime.Round(time.Millisecond), m.Paths.DataDir)
	return nil
}

func (m *Mover) undoPlan() *install.Plan {
	return &install.Plan{Op: "undo", Steps: []install.Step{
		{Name: "stop-apiserver", Impact: "the API server stops: requests fail until restore-apiserver",
			Do: m.undoStopDo, Undo: m.undoStopUndo},
		{Name: "copy-back", Impact: "API server down: what changed on the store since the move is written into etcd",
			Do: m.copyBackDo},
		{Name: "bump-revision", Impact: "API server down: etcd's revision is raised past the store's and compacted, so stale watchers get 410 and relist",
			Do: m.bumpDo},
		{Name: "restore-apiserver", Commit: true, Impact: "the API server starts again on etcd with its original manifest, byte for byte",
			Do: m.restoreDo, Undo: m.restoreUndo},
		{Name: "stop-store", Impact: "none: the quantykube-store unit stops and is disabled; its data stays for inspection",
			Do: m.removeUnit},
	}}
}

func (m *Mover) undoStopDo(ctx context.Context) error {
	m.stopped = time.Now()
	return m.Paths.stopAPIServer(ctx, m.Paths.savedStoreManifest(), m.port)
}

// undoStopUndo puts the API server back on the store: the store's unit is
// (re)installed first in case a later step had removed it.
func (m *Mover) undoStopUndo(ctx context.Context) error {
	cur, err := os.ReadFile(m.Paths.savedStoreManifest())
	if err != nil {
		return fmt.Errorf("read the saved store manifest: %w", err)
	}
	if !systemd.Active(ctx, UnitName) {
		if err := systemd.Install(ctx, m.storeUnit()); err != nil {
			return err
		}
	}
	return m.Paths.startAPIServer(ctx, cur, 3*time.Minute)
}

func (m *Mover) dialBoth() (store, etcd *clientv3.Client, err error) {
	if store, err = m.Paths.dial(StoreURL); err != nil {
		return nil, nil, err
	}
	if etcd, err = m.Paths.dial(m.endpoint); err != nil {
		store.Close()
		return nil, nil, err
	}
	return store, etcd, nil
}

// copyBackDo makes etcd hold exactly the store's keys: a merge of both
// keyspaces in key order, page by page, writing what differs. Keys keep the
// store's leases (granted in etcd with the same ID and the time left).
func (m *Mover) copyBackDo(ctx context.Context) error {
	store, etcd, err := m.dialBoth()
	if err != nil {
		return err
	}
	defer store.Close()
	defer etcd.Close()
	resp, err := store.Get(ctx, "health")
	if err != nil {
		return fmt.Errorf("read the store's revision: %w", err)
	}
	storeRev := resp.Header.Revision
	leases := map[int64]bool{}
	var puts, dels int64
	write := func(ops []clientv3.Op) error {
		for len(ops) > 0 {
			n := min(len(ops), 100)
			if _, err := etcd.Txn(ctx).Then(ops[:n]...).Commit(); err != nil {
				return fmt.Errorf("write to etcd: %w", err)
			}
			ops = ops[n:]
		}
		return nil
	}
	sIt := newPager(store, storeRev)
	eIt := newPager(etcd, 0)
	var ops []clientv3.Op
	for {
		s, err := sIt.peek(ctx)
		if err != nil {
			return err
		}
		e, err := eIt.peek(ctx)
		if err != nil {
			return err
		}
		if s == nil && e == nil {
			break
		}
		switch c := compareKeys(s, e); {
		case c < 0: // only on the store
			op, err := m.putOp(ctx, store, etcd, s, leases)
			if err != nil {
				return err
			}
			ops, puts = append(ops, op), puts+1
			sIt.next()
		case c > 0: // only in etcd
			ops, dels = append(ops, clientv3.OpDelete(string(e.Key))), dels+1
			eIt.next()
		default:
			if !bytes.Equal(s.Value, e.Value) || s.Lease != e.Lease {
				op, err := m.putOp(ctx, store, etcd, s, leases)
				if err != nil {
					return err
				}
				ops, puts = append(ops, op), puts+1
			}
			sIt.next()
			eIt.next()
		}
		if len(ops) >= 100 {
			if err := write(ops); err != nil {
				return err
			}
			ops = ops[:0]
		}
	}
	if err := write(ops); err != nil {
		return err
	}
	m.finalRev = storeRev
	fmt.Fprintf(m.Out, "  store at revision %d: %d keys written and %d deleted in etcd\n", storeRev, puts, dels)
	return nil
}

// putOp is a put of the store's key-value into etcd, with its lease granted
// in etcd first (same ID, the time it has left on the store).
func (m *Mover) putOp(ctx context.Context, store, etcd *clientv3.Client, kv *mvccpb.KeyValue, leases map[int64]bool) (clientv3.Op, error) {
	if kv.Lease == 0 {
		return clientv3.OpPut(string(kv.Key), string(kv.Value)), nil
	}
	if !leases[kv.Lease] {
		ttl, err := store.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		if err != nil {
			return clientv3.Op{}, fmt.Errorf("read the store's lease %x: %w", kv.Lease, err)
		}
		_, err = pb.NewLeaseClient(etcd.ActiveConnection()).LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: kv.Lease, TTL: max(ttl.TTL, 1)})
		if err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseExist) {
			return clientv3.Op{}, fmt.Errorf("grant lease %x in etcd: %w", kv.Lease, err)
		}
		leases[kv.Lease] = true
	}
	return clientv3.OpPut(string(kv.Key), string(kv.Value), clientv3.WithLease(clientv3.LeaseID(kv.Lease))), nil
}

func compareKeys(s, e *mvccpb.KeyValue) int {
	switch {
	case s == nil:
		return 1
	case e == nil:
		return -1
	}
	return bytes.Compare(s.Key, e.Key)
}

// pager walks a whole keyspace at one revision, a page at a time.
type pager struct {
	cli  *clientv3.Client
	rev  int64
	buf  []*mvccpb.KeyValue
	from []byte
	done bool
}

func newPager(cli *clientv3.Client, rev int64) *pager {
	return &pager{cli: cli, rev: rev, from: []byte{0}}
}

func (p *pager) peek(ctx context.Context) (*mvccpb.KeyValue, error) {
	if len(p.buf) == 0 && !p.done {
		opts := []clientv3.OpOption{clientv3.WithRange("\x00"), clientv3.WithLimit(DefaultPageSize)}
		if p.rev != 0 {
			opts = append(opts, clientv3.WithRev(p.rev))
		}
		resp, err := p.cli.Get(ctx, string(p.from), opts...)
		if err != nil {
			return nil, fmt.Errorf("read keys from %q: %w", p.from, err)
		}
		if p.rev == 0 {
			p.rev = resp.Header.Revision
		}
		p.buf = resp.Kvs
		p.done = !resp.More
		if len(resp.Kvs) > 0 {
			p.from = append(append([]byte(nil), resp.Kvs[len(resp.Kvs)-1].Key...), 0)
		}
	}
	if len(p.buf) == 0 {
		return nil, nil
	}
	return p.buf[0], nil
}

func (p *pager) next() { p.buf = p.buf[1:] }

// bumpDo raises etcd's revision above the store's, so no client holds a
// resourceVersion etcd has not reached, then compacts etcd there: watchers
// that resume from a store-era resourceVersion get 410 and relist.
func (m *Mover) bumpDo(ctx context.Context) error {
	_, etcd, err := m.dialBoth()
	if err != nil {
		return err
	}
	defer etcd.Close()
	if m.finalRev == 0 {
		store, err := m.Paths.dial(StoreURL)
		if err != nil {
			return err
		}
		resp, err := store.Get(ctx, "health")
		store.Close()
		if err != nil {
			return fmt.Errorf("read the store's revision: %w", err)
		}
		m.finalRev = resp.Header.Revision
	}
	resp, err := etcd.Get(ctx, bumpKey)
	if err != nil {
		return fmt.Errorf("read etcd's revision: %w", err)
	}
	var rev atomic.Int64
	rev.Store(resp.Header.Revision)
	var bumped atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 32)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rev.Load() <= m.finalRev {
				r, err := etcd.Put(ctx, bumpKey, "")
				if err != nil {
					errc <- fmt.Errorf("raise etcd's revision: %w", err)
					return
				}
				bumped.Add(1)
				for cur := rev.Load(); r.Header.Revision > cur && !rev.CompareAndSwap(cur, r.Header.Revision); cur = rev.Load() {
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	d, err := etcd.Delete(ctx, bumpKey)
	if err != nil {
		return fmt.Errorf("delete %s: %w", bumpKey, err)
	}
	if _, err := etcd.Compact(ctx, d.Header.Revision, clientv3.WithCompactPhysical()); err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrCompacted) {
		return fmt.Errorf("compact etcd at %d: %w", d.Header.Revision, err)
	}
	fmt.Fprintf(m.Out, "  etcd raised from %d to %d (%d writes) and compacted there; the store was at %d\n",
		resp.Header.Revision, d.Header.Revision, bumped.Load(), m.finalRev)
	return nil
}

func (m *Mover) restoreDo(ctx context.Context) error {
	if err := m.Paths.startAPIServer(ctx, m.manifest, 3*time.Minute); err != nil {
		return err
	}
	if !m.stopped.IsZero() {
		m.Downtime = time.Since(m.stopped)
		fmt.Fprintf(m.Out, "  API-server downtime: %v\n", m.Downtime.Round(time.Millisecond))
	}
	return nil
}

func (m *Mover) restoreUndo(ctx context.Context) error {
	return m.Paths.stopAPIServer(ctx, m.Paths.savedManifest()+".undo", m.port)
}
