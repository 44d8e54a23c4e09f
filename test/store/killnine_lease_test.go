package storee2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

type mvccKV = mvccpb.KeyValue

// kill9Leases are leases granted before the kills: one long (must survive
// with its key), one revoked (must stay revoked), one short (must still
// expire after restarts).
type kill9Leases struct {
	long, revoked, short clientv3.LeaseID
}

func grantKill9Leases(t *testing.T, s *server) *kill9Leases {
	t.Helper()
	cli := s.Client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	grant := func(ttl int64, key string) clientv3.LeaseID {
		l, err := cli.Grant(ctx, ttl)
		if err != nil {
			t.Fatalf("grant a %ds lease: %v", ttl, err)
		}
		if _, err := cli.Put(ctx, key, "on a lease", clientv3.WithLease(l.ID)); err != nil {
			t.Fatalf("put %s on lease %x: %v", key, l.ID, err)
		}
		return l.ID
	}
	l := &kill9Leases{
		long:    grant(3600, "kn-lease/long"),
		revoked: grant(3600, "kn-lease/revoked"),
		short:   grant(5, "kn-lease/short"),
	}
	if _, err := cli.Revoke(ctx, l.revoked); err != nil {
		t.Fatalf("revoke lease %x: %v", l.revoked, err)
	}
	return l
}

// verify checks the long and revoked leases after a restart.
func (l *kill9Leases) verify(t *testing.T, s *server, cycle int) {
	t.Helper()
	cli := s.Client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ttl, err := cli.TimeToLive(ctx, l.long, clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatalf("cycle %d: time to live of lease %x: %v", cycle, l.long, err)
	}
	var keys []string
	for _, k := range ttl.Keys {
		keys = append(keys, string(k))
	}
	if ttl.TTL <= 0 || ttl.TTL > 3600 || ttl.GrantedTTL != 3600 || !slices.Equal(keys, []string{"kn-lease/long"}) {
		t.Fatalf("cycle %d: lease %x after restart: TTL %d granted %d keys %v; want alive, granted 3600, keys [kn-lease/long]", cycle, l.long, ttl.TTL, ttl.GrantedTTL, keys)
	}
	if ttl, err := cli.TimeToLive(ctx, l.revoked); err != nil || ttl.TTL != -1 {
		t.Fatalf("cycle %d: revoked lease %x after restart: %+v %v; want TTL -1 (not found)", cycle, l.revoked, ttl, err)
	}
	r, err := cli.Get(ctx, "kn-lease/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("cycle %d: get kn-lease/: %v", cycle, err)
	}
	for _, kv := range r.Kvs {
		if string(kv.Key) == "kn-lease/revoked" {
			t.Fatalf("cycle %d: the key of a revoked lease is back after restart", cycle)
		}
	}
	if !slices.ContainsFunc(r.Kvs, func(kv *mvccKV) bool {
		return string(kv.Key) == "kn-lease/long" && clientv3.LeaseID(kv.Lease) == l.long
	}) {
		t.Fatalf("cycle %d: kn-lease/long missing or not on lease %x after restart", cycle, l.long)
	}
	ls, err := cli.Leases(ctx)
	if err != nil {
		t.Fatalf("cycle %d: list leases: %v", cycle, err)
	}
	var ids []clientv3.LeaseID
	for _, x := range ls.Leases {
		ids = append(ids, x.ID)
	}
	if !slices.Contains(ids, l.long) || slices.Contains(ids, l.revoked) {
		t.Fatalf("cycle %d: leases after restart %x; want %x and not %x", cycle, ids, l.long, l.revoked)
	}
}

// verifyShortExpires checks that the 5 s lease granted before the kills
// expires (taking its key) once the server stays up.
func (l *kill9Leases) verifyShortExpires(t *testing.T, s *server) {
	t.Helper()
	cli := s.Client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		r, err := cli.Get(ctx, "kn-lease/short")
		if err != nil {
			t.Fatalf("5s lease granted before the kills: key still there after 60s (%v)", err)
		}
		if len(r.Kvs) == 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if ttl, err := cli.TimeToLive(ctx, l.short); err != nil || ttl.TTL != -1 {
		t.Fatalf("5s lease %x: key gone but lease %+v %v; want TTL -1", l.short, ttl, err)
	}
}
