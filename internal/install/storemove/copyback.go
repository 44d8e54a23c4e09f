package storemove

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxOpsPerTxn bounds one transaction written into etcd (etcd's default
// --max-txn-ops is 128).
const maxOpsPerTxn = 100

// backCopier makes etcd hold the store's keys, the reverse of Copier, while
// the API server still serves the store: Merge writes into etcd what differs
// from the store at one revision, Follow then applies each later revision of
// the store to etcd as one transaction, and CatchUp waits until Follow has
// applied everything up to a revision. Keys keep the store's leases (granted
// in etcd with the same ID and the time they have left).
//
// etcd's revisions are its own: the store's revisions cannot be written into
// it. What undo guarantees instead is that etcd's revision ends above every
// revision the store handed out (see raiseEtcd).
type backCopier struct {
	store, etcd *clientv3.Client

	mu      sync.Mutex
	applied int64 // newest store revision whose changes etcd holds
	leases  map[int64]bool
	// stopped is Follow's error once it has returned (CatchUp stops
	// waiting for a follower that is gone).
	stopped error
}

func newBackCopier(store, etcd *clientv3.Client) *backCopier {
	return &backCopier{store: store, etcd: etcd, leases: map[int64]bool{}}
}

// Applied is the newest store revision whose changes etcd holds.
func (b *backCopier) Applied() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.applied
}

// Merge makes etcd hold exactly the store's keys as of store revision rev:
// a merge of both keyspaces in key order, page by page, writing only what
// differs. It returns the keys written and deleted in etcd.
func (b *backCopier) Merge(ctx context.Context, rev int64) (puts, dels int64, err error) {
	sIt, eIt := newPager(b.store, rev), newPager(b.etcd, 0)
	var ops []clientv3.Op
	for {
		s, err := sIt.peek(ctx)
		if err != nil {
			return puts, dels, err
		}
		e, err := eIt.peek(ctx)
		if err != nil {
			return puts, dels, err
		}
		if s == nil && e == nil {
			break
		}
		switch c := compareKeys(s, e); {
		case c > 0: // only in etcd (the key undo raises etcd's revision with stays)
			if string(e.Key) != bumpKey {
				ops, dels = append(ops, clientv3.OpDelete(string(e.Key))), dels+1
			}
			eIt.next()
			continue
		case c == 0:
			eIt.next()
			if bytes.Equal(s.Value, e.Value) && s.Lease == e.Lease {
				sIt.next()
				continue
			}
		}
		op, err := b.putOp(ctx, s)
		if err != nil {
			return puts, dels, err
		}
		ops, puts = append(ops, op), puts+1
		sIt.next()
		if len(ops) >= maxOpsPerTxn {
			if err := b.writeAll(ctx, ops); err != nil {
				return puts, dels, err
			}
			ops = ops[:0]
		}
	}
	if err := b.writeAll(ctx, ops); err != nil {
		return puts, dels, err
	}
	b.mu.Lock()
	b.applied = max(b.applied, rev)
	b.mu.Unlock()
	return puts, dels, nil
}

// writeAll writes ops into etcd, maxOpsPerTxn per transaction.
func (b *backCopier) writeAll(ctx context.Context, ops []clientv3.Op) error {
	for len(ops) > 0 {
		n := min(len(ops), maxOpsPerTxn)
		if _, err := b.etcd.Txn(ctx).Then(ops[:n]...).Commit(); err != nil {
			return fmt.Errorf("write to etcd: %w", err)
		}
		ops = ops[n:]
	}
	return nil
}

// putOp is a put of the store's key-value into etcd, with its lease granted
// in etcd first (same ID, the time it has left on the store).
func (b *backCopier) putOp(ctx context.Context, kv *mvccpb.KeyValue) (clientv3.Op, error) {
	if kv.Lease == 0 {
		return clientv3.OpPut(string(kv.Key), string(kv.Value)), nil
	}
	b.mu.Lock()
	granted := b.leases[kv.Lease]
	b.mu.Unlock()
	if !granted {
		ttl, err := b.store.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		if err != nil {
			return clientv3.Op{}, fmt.Errorf("read the store's lease %x: %w", kv.Lease, err)
		}
		_, err = pb.NewLeaseClient(b.etcd.ActiveConnection()).LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: kv.Lease, TTL: max(ttl.TTL, 1)})
		if err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseExist) {
			return clientv3.Op{}, fmt.Errorf("grant lease %x in etcd: %w", kv.Lease, err)
		}
		b.mu.Lock()
		b.leases[kv.Lease] = true
		b.mu.Unlock()
	}
	return clientv3.OpPut(string(kv.Key), string(kv.Value), clientv3.WithLease(clientv3.LeaseID(kv.Lease))), nil
}

// Follow watches the store from the revision after Applied and writes each
// later revision's changes into etcd as one transaction, until ctx ends. If
// the store compacted past the watch's start (the API server compacts every
// five minutes), it merges again at the store's current revision and goes on
// from there.
func (b *backCopier) Follow(ctx context.Context) (err error) {
	defer func() {
		b.mu.Lock()
		b.stopped = fmt.Errorf("following the store stopped: %w", err)
		b.mu.Unlock()
	}()
	for {
		err := b.follow(ctx)
		if !errors.Is(err, rpctypes.ErrCompacted) {
			return err
		}
		resp, gerr := b.store.Get(ctx, "health")
		if gerr != nil {
			return fmt.Errorf("read the store's revision: %w", gerr)
		}
		if _, _, merr := b.Merge(ctx, resp.Header.Revision); merr != nil {
			return merr
		}
	}
}

func (b *backCopier) follow(ctx context.Context) error {
	from := b.Applied() + 1
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := b.store.Watch(wctx, "\x00", clientv3.WithRange("\x00"), clientv3.WithRev(from), clientv3.WithProgressNotify())
	for resp := range wch {
		if resp.CompactRevision != 0 {
			return rpctypes.ErrCompacted
		}
		if err := resp.Err(); err != nil {
			return fmt.Errorf("watch the store from revision %d: %w", from, err)
		}
		if err := b.applyEvents(ctx, resp.Events); err != nil {
			return err
		}
		if resp.IsProgressNotify() {
			// Every change up to the header revision has been delivered.
			b.mu.Lock()
			b.applied = max(b.applied, resp.Header.Revision)
			b.mu.Unlock()
		}
	}
	return ctx.Err()
}

// applyEvents writes events (in revision order) into etcd, one transaction
// per store revision, so a revision's changes reach etcd together.
func (b *backCopier) applyEvents(ctx context.Context, evs []*clientv3.Event) error {
	for len(evs) > 0 {
		rev := evs[0].Kv.ModRevision
		n := 1
		for n < len(evs) && evs[n].Kv.ModRevision == rev {
			n++
		}
		ops := make([]clientv3.Op, 0, n)
		for _, ev := range evs[:n] {
			if ev.Type == mvccpb.DELETE {
				ops = append(ops, clientv3.OpDelete(string(ev.Kv.Key)))
				continue
			}
			op, err := b.putOp(ctx, ev.Kv)
			if err != nil {
				return err
			}
			ops = append(ops, op)
		}
		if err := b.writeAll(ctx, ops); err != nil {
			return fmt.Errorf("apply the store's revision %d: %w", rev, err)
		}
		b.mu.Lock()
		b.applied = max(b.applied, rev)
		b.mu.Unlock()
		evs = evs[n:]
	}
	return nil
}

// CatchUp waits until Follow has written everything up to the store's
// revision target (which must no longer change: the API server is stopped),
// asking the store for watch progress so the watch proves it delivered all.
func (b *backCopier) CatchUp(ctx context.Context, target int64) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for b.Applied() < target {
		b.mu.Lock()
		stopped := b.stopped
		b.mu.Unlock()
		if stopped != nil {
			return stopped
		}
		if err := b.store.RequestProgress(clientv3.WithRequireLeader(ctx)); err != nil {
			return fmt.Errorf("ask the store for watch progress: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("catch up to the store's revision %d (at %d): %w", target, b.Applied(), ctx.Err())
		case <-t.C:
		}
	}
	return nil
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
