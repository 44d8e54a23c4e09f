package storee2e

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestClusterLeasesAcrossLeaderChange: a lease kept alive through a
// follower survives two leader kills (a new leader renews every lease, no
// mass expiry); a lease that is not kept alive expires once, on the leader's
// decision, and every member's watch sees the same DELETE at the same
// revision.
func TestClusterLeasesAcrossLeaderChange(t *testing.T) {
	c := startCluster(t, 3, clusterOptions{})
	cl := c.Client()
	defer cl.Close()
	kept, err := cl.Grant(context.Background(), 6)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Put(context.Background(), "lease/kept", "x", clientv3.WithLease(kept.ID)); err != nil {
		t.Fatal(err)
	}
	// Watches on every member, from now.
	var watches []clientv3.WatchChan
	var clients []*clientv3.Client
	for _, m := range c.Members {
		mc := m.Client()
		clients = append(clients, mc)
		watches = append(watches, mc.Watch(context.Background(), "lease/", clientv3.WithPrefix()))
	}
	defer func() {
		for _, mc := range clients {
			mc.Close()
		}
	}()
	short, err := cl.Grant(context.Background(), 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Put(context.Background(), "lease/short", "x", clientv3.WithLease(short.ID)); err != nil {
		t.Fatal(err)
	}
	ka, err := cl.KeepAlive(context.Background(), kept.ID)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range ka {
		}
	}()
	for round := 0; round < 2; round++ {
		li := c.leader(10 * time.Second)
		c.Members[li].Kill9()
		c.leader(15 * time.Second)
		c.Members[li].startProc()
		c.Members[li].waitReady()
	}
	ttl, err := cl.TimeToLive(context.Background(), kept.ID)
	if err != nil || ttl.TTL <= 0 {
		t.Fatalf("the kept-alive lease did not survive two leader changes: %v %v", ttl, err)
	}
	// Every member saw lease/short deleted once, at one revision.
	var delRev int64
	for i, wc := range watches {
		rev := waitDelete(t, wc, "lease/short", 30*time.Second)
		if i == 0 {
			delRev = rev
		} else if rev != delRev {
			t.Fatalf("member %s saw lease/short deleted at %d, another member at %d", c.Members[i].Name, rev, delRev)
		}
	}
	t.Logf("the 4 s lease expired once (DELETE at revision %d on every member); the kept lease has %d s left", delRev, ttl.TTL)
	c.waitCaughtUp(30 * time.Second)
	c.checkSameState(0)
}

// waitDelete returns the revision of key's DELETE event on wc. A watch
// broken by a member's kill is retried by the client on its own.
func waitDelete(t *testing.T, wc clientv3.WatchChan, key string, timeout time.Duration) int64 {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case resp, ok := <-wc:
			if !ok {
				t.Fatalf("watch for %s closed", key)
			}
			if err := resp.Err(); err != nil {
				t.Fatalf("watch for %s: %v", key, err)
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE && string(ev.Kv.Key) == key {
					return ev.Kv.ModRevision
				}
			}
		case <-deadline:
			t.Fatalf("no DELETE of %s within %v", key, timeout)
		}
	}
}
