package mirror

import (
	"context"
	"errors"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.uber.org/zap"
)

// TestKeepAlivesOutlastUnansweredRenewals holds etcd's answers to the
// renewals (etcd's own fault proxy, answers paused, requests passing) for
// longer than the lease's TTL: the renewals still reach etcd, which keeps
// the lease, and the renewer must go on renewing once answers come back. clientv3's KeepAlive gives the lease
// up at its deadline here, and etcd then expires it and deletes its key
// (this test fails with it).
func TestKeepAlivesOutlastUnansweredRenewals(t *testing.T) {
	direct := startEtcd(t)
	from := freeURL(t)
	px := proxy.NewServer(proxy.ServerConfig{Logger: zap.NewNop(), From: from, To: mustURL(t, direct.Endpoints()[0])})
	t.Cleanup(func() { px.Close() })
	<-px.Ready()
	viaProxy, err := clientv3.New(clientv3.Config{Endpoints: []string{from.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { viaProxy.Close() })

	ctx := context.Background()
	const ttl = 5
	l, err := direct.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	put, err := direct.Put(ctx, "/registry/masterleases/10.0.0.1", "x", clientv3.WithLease(l.ID))
	if err != nil {
		t.Fatal(err)
	}
	k := newKeepAlives(viaProxy)
	defer k.close()
	k.keep(int64(l.ID))
	time.Sleep(time.Second)

	px.PauseRx()
	time.Sleep(8 * time.Second)
	px.UnpauseRx()
	time.Sleep(2 * ttl * time.Second)

	live, err := direct.TimeToLive(ctx, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if live.TTL <= 0 || !k.kept(int64(l.ID)) {
		t.Fatalf("lease %x: TTL %d on etcd, still renewed %v: the renewer gave it up while etcd held it", l.ID, live.TTL, k.kept(int64(l.ID)))
	}
	get, err := direct.Get(ctx, "/registry/masterleases/10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if get.Header.Revision != put.Header.Revision || len(get.Kvs) != 1 {
		t.Fatalf("etcd moved from revision %d to %d (%d keys left): it expired the lease", put.Header.Revision, get.Header.Revision, len(get.Kvs))
	}
}

// TestKeepAlivesRetryUntilGone: failed renewals are retried without end; a
// lease etcd reports gone, or one stopped, is renewed no more.
func TestKeepAlivesRetryUntilGone(t *testing.T) {
	var calls, failing atomic.Int64
	failing.Store(1)
	k := startKeepAlives(func(ctx context.Context, id int64) (int64, error) {
		calls.Add(1)
		switch {
		case id == 2:
			return 0, rpctypes.ErrLeaseNotFound
		case failing.Load() == 1:
			return 0, errors.New("etcdserver: request timed out")
		}
		return 60, nil
	})
	defer k.close()
	k.keep(1)
	k.keep(2)
	k.keep(3)
	k.stop(3)
	waitFor(t, func() bool { return calls.Load() >= 5 })
	if !k.kept(1) || k.kept(2) || k.kept(3) {
		t.Fatalf("kept 1/2/3 = %v/%v/%v, want true/false/false", k.kept(1), k.kept(2), k.kept(3))
	}
	failing.Store(0)
	n := calls.Load()
	waitFor(t, func() bool { return calls.Load() > n })
	time.Sleep(4 * keepTick) // renewed: next one due in 20 s
	if got := calls.Load(); got > n+1 || !k.kept(1) {
		t.Fatalf("after a renewal answered with TTL 60, %d more renewals (want 1), kept %v", got-n, k.kept(1))
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("condition not met within 10 s")
		}
	}
}

func mustURL(t *testing.T, s string) url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return *u
}
