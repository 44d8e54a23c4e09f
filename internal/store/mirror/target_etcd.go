package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdTarget replays into an etcd cluster through its client API, one
// transaction per revision, in order. It keeps every lease it holds alive:
// the target never expires a lease by itself while it replays (the store
// revokes them, and the replay deletes their keys and revokes them there).
// The renewals (alive) belong to the mode, not to one run of the replay: a
// run that stops on an error leaves them going for the next one, which may
// list etcd's leases from a member that has not caught up yet.
type etcdTarget struct {
	cli   *clientv3.Client
	kv    pb.KVClient
	lease pb.LeaseClient
	name  string
	alive *keepAlives
}

func newEtcdTarget(cli *clientv3.Client, name string, alive *keepAlives) *etcdTarget {
	return &etcdTarget{cli: cli, kv: pb.NewKVClient(cli.ActiveConnection()), lease: pb.NewLeaseClient(cli.ActiveConnection()),
		name: name, alive: alive}
}

func (t *etcdTarget) Name() string { return t.name }

func (t *etcdTarget) Rev(ctx context.Context) (int64, error) {
	rev, err := etcdRev(ctx, t.cli)
	if err != nil {
		return 0, fmt.Errorf("read %s's revision: %w", t.name, err)
	}
	return rev, nil
}

// Leases lists the target's leases and keeps each alive from now on.
func (t *etcdTarget) Leases(ctx context.Context) (map[int64]bool, error) {
	resp, err := t.cli.Leases(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s's leases: %w", t.name, err)
	}
	out := map[int64]bool{}
	for _, l := range resp.Leases {
		out[int64(l.ID)] = true
		t.alive.keep(int64(l.ID))
	}
	return out, nil
}

func (t *etcdTarget) Keep(ids []int64) {
	for _, id := range ids {
		t.alive.keep(id)
	}
}

func (t *etcdTarget) Apply(ctx context.Context, b Batch) (int64, error) {
	for _, g := range b.Grants {
		_, err := t.lease.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: g.ID, TTL: g.TTL})
		if err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseExist) {
			return 0, fmt.Errorf("grant lease %x on %s: %w", g.ID, t.name, err)
		}
		t.alive.keep(g.ID)
	}
	var rev int64
	for _, c := range b.Changes {
		r, err := t.applyChange(ctx, c)
		if err != nil {
			return 0, err
		}
		rev = r
	}
	for _, id := range b.Revokes {
		if err := t.revokeIfKeyless(ctx, id); err != nil {
			return 0, err
		}
	}
	if len(b.Changes) == 0 {
		return t.Rev(ctx)
	}
	return rev, nil
}

// applyChange makes revision c.Rev on the target. A transaction refused for
// its size that deletes exactly one lease's keys (an expiry or revoke on the
// store) is replayed as that lease's revoke, which etcd applies as one
// revision deleting the keys in the same (key) order.
func (t *etcdTarget) applyChange(ctx context.Context, c Change) (int64, error) {
	resp, err := t.kv.Txn(ctx, c.Txn())
	if errors.Is(rpctypes.Error(err), rpctypes.ErrTooManyOps) {
		return t.applyAsRevoke(ctx, c)
	}
	if err != nil {
		return 0, fmt.Errorf("replay revision %d on %s: %w", c.Rev, t.name, err)
	}
	got := resp.Header.Revision
	switch {
	case resp.Succeeded && got == c.Rev:
		return got, nil
	case !resp.Succeeded && got >= c.Rev:
		// Applied before (a retried revision whose first attempt landed,
		// or another run's): checked, not assumed — a revision etcd made
		// by itself would fail the compare the same way.
		if err := t.verifyApplied(ctx, c); err != nil {
			return 0, err
		}
		return got, nil
	case !resp.Succeeded:
		return 0, diverged("%s does not hold the state the store had before revision %d (%s is at %d)", t.name, c.Rev, t.name, got)
	}
	return 0, diverged("revision %d made revision %d on %s", c.Rev, got, t.name)
}

// verifyApplied checks that etcd's revision c.Rev is the source's: every
// key c puts has mod_revision c.Rev there, every key it deletes is gone.
func (t *etcdTarget) verifyApplied(ctx context.Context, c Change) error {
	for _, ev := range c.Events {
		resp, err := t.cli.Get(ctx, string(ev.Kv.Key), clientv3.WithRev(c.Rev))
		if err != nil {
			return fmt.Errorf("read %q at revision %d on %s: %w", ev.Kv.Key, c.Rev, t.name, err)
		}
		switch {
		case ev.Type == mvccpb.PUT && (len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != c.Rev):
			return diverged("%s's revision %d does not hold the store's put of %q", t.name, c.Rev, ev.Kv.Key)
		case ev.Type == mvccpb.DELETE && len(resp.Kvs) != 0:
			return diverged("%s's revision %d does not hold the store's delete of %q", t.name, c.Rev, ev.Kv.Key)
		}
	}
	return nil
}

func (t *etcdTarget) applyAsRevoke(ctx context.Context, c Change) (int64, error) {
	tooBig := fatal{fmt.Errorf("revision %d changes %d keys, more than %s's --max-txn-ops allows in one transaction; restart its members with --max-txn-ops %d or more and run replay-to again",
		c.Rev, len(c.Events), t.name, len(c.Events))}
	id := int64(0)
	keys := make([]string, 0, len(c.Events))
	for _, ev := range c.Events {
		if ev.Type != mvccpb.DELETE || ev.PrevKv == nil || ev.PrevKv.Lease == 0 || id != 0 && ev.PrevKv.Lease != id {
			return 0, tooBig
		}
		id = ev.PrevKv.Lease
		keys = append(keys, string(ev.Kv.Key))
	}
	ttl, err := t.cli.TimeToLive(ctx, clientv3.LeaseID(id), clientv3.WithAttachedKeys())
	if err != nil {
		return 0, fmt.Errorf("lease %x on %s: %w", id, t.name, err)
	}
	held := make([]string, len(ttl.Keys))
	for i, k := range ttl.Keys {
		held[i] = string(k)
	}
	slices.Sort(held)
	slices.Sort(keys)
	if !slices.Equal(held, keys) {
		return 0, tooBig
	}
	resp, err := t.lease.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: id})
	if err != nil {
		return 0, fmt.Errorf("replay revision %d on %s as the revoke of lease %x: %w", c.Rev, t.name, id, err)
	}
	t.alive.stop(id)
	if resp.Header.Revision != c.Rev {
		return 0, diverged("revision %d (the revoke of lease %x) made revision %d on %s", c.Rev, id, resp.Header.Revision, t.name)
	}
	return c.Rev, nil
}

func (t *etcdTarget) revokeIfKeyless(ctx context.Context, id int64) error {
	ttl, err := t.cli.TimeToLive(ctx, clientv3.LeaseID(id), clientv3.WithAttachedKeys())
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || err == nil && ttl.TTL == -1 {
		t.alive.stop(id)
		return nil
	}
	if err != nil {
		return fmt.Errorf("lease %x on %s: %w", id, t.name, err)
	}
	if len(ttl.Keys) > 0 {
		return nil // its keys are deleted by revisions still to come
	}
	if _, err := t.lease.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: id}); err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("revoke lease %x on %s: %w", id, t.name, err)
	}
	t.alive.stop(id)
	return nil
}

func (t *etcdTarget) Digest(ctx context.Context, rev int64) (Digest, error) {
	return etcdDigest(ctx, t.cli, t.name, rev)
}

func (t *etcdTarget) Close() {}
