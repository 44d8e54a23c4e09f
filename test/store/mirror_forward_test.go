package storee2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

// seedEtcd writes n keys (some under leases, some updated, some deleted)
// and returns the leases it granted.
func seedEtcd(t *testing.T, c *clientv3.Client, n int) []clientv3.LeaseID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var leases []clientv3.LeaseID
	for i := 0; i < 3; i++ {
		l, err := c.Grant(ctx, int64(600+i))
		if err != nil {
			t.Fatalf("grant: %v", err)
		}
		leases = append(leases, l.ID)
	}
	for i := 0; i < n; i++ {
		var opts []clientv3.OpOption
		if i%10 == 0 {
			opts = append(opts, clientv3.WithLease(leases[i%3]))
		}
		if _, err := c.Put(ctx, fmt.Sprintf("/seed/%05d", i), fmt.Sprintf("value %d", i), opts...); err != nil {
			t.Fatalf("seed put: %v", err)
		}
		if i%7 == 0 {
			if _, err := c.Put(ctx, fmt.Sprintf("/seed/%05d", i), "updated", opts...); err != nil {
				t.Fatalf("seed update: %v", err)
			}
		}
		if i%13 == 0 {
			if _, err := c.Delete(ctx, fmt.Sprintf("/seed/%05d", i)); err != nil {
				t.Fatalf("seed delete: %v", err)
			}
		}
	}
	return leases
}

// mirroredRig is a 3-member etcd with seed data, and a 3-member store made
// from its snapshot, mirroring it; etcd is written between the snapshot
// and the start, as it is on a live control plane.
func mirroredRig(t *testing.T, keys int) *mirrorRig {
	t.Helper()
	r := newMirrorRig(t)
	r.startEtcd(3)
	ec := r.etcdClient()
	defer ec.Close()
	seedEtcd(t, ec, keys)
	snap := snapshotSave(t, r.Etcd[0])
	rev := snapshotStatus(t, snap).Revision
	for i := 0; i < 50; i++ {
		if _, err := ec.Put(context.Background(), fmt.Sprintf("/after-snapshot/%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	r.storeFromSnapshot(snap, rev, 3)
	level := r.waitLevel(2 * time.Minute)
	t.Logf("store cluster of %d made from the snapshot at revision %d and level with etcd at %d in %v", len(r.Store), rev, level, time.Since(start).Round(time.Millisecond))
	return r
}

// TestMirrorForward mirrors a 3-member etcd cluster into a 3-member store
// while one writer writes to etcd directly and one per store member
// writes through the store (forwarded), with the store's leader killed
// (SIGKILL) and restarted mid-way. Every acknowledged write is on both at
// the revision it was acknowledged at; each store writer reads its own
// writes on its member (serializable); a linearizable read on the store
// after each etcd write sees it; a watch on the store sees every write with
// revisions never going backwards; at the end every key is identical on
// etcd and every store member.
func TestMirrorForward(t *testing.T) {
	r := mirroredRig(t, 500)
	level := r.waitLevel(time.Minute)
	r.compareAll(level)
	ec, sc := r.etcdClient(), r.storeClient()
	defer ec.Close()
	defer sc.Close()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	watch := watchRevs(wctx, sc, "/w/", level+1)
	direct := newAckWriter("etcd-direct", ec, "/w/direct/", 5*time.Millisecond)
	direct.check = sees(sc)
	direct.run(ctx, &wg)
	writers := []*ackWriter{direct}
	for i, m := range r.Store {
		mc := m.Client()
		defer mc.Close()
		w := newAckWriter("via-"+m.Name, mc, fmt.Sprintf("/w/via%d/", i), 0)
		w.check = sees(mc, clientv3.WithSerializable())
		w.run(ctx, &wg)
		writers = append(writers, w)
	}
	time.Sleep(4 * time.Second)
	li := r.storeLeader()
	t.Logf("killing the store leader %s (SIGKILL) mid-mirror: %+v", r.Store[li].Name, r.status(li).Replayer)
	r.Store[li].Kill9()
	time.Sleep(3 * time.Second)
	nl := r.storeLeader()
	r.Store[li].startProc()
	waitServes(t, r.Store[li])
	t.Logf("new leader %s; %s restarted", r.Store[nl].Name, r.Store[li].Name)
	time.Sleep(4 * time.Second)
	cancel()
	wg.Wait()

	level = r.waitLevel(2 * time.Minute)
	n := r.compareAll(level)
	kvs, _ := getAll(t, ec, level)
	acked := checkAcked(t, "etcd", kvs, writers...)
	sk := r.Store[0].Client()
	skv, _ := getAll(t, sk, level)
	sk.Close()
	checkAcked(t, "store", skv, writers...)
	for _, w := range writers {
		w.report(t)
	}
	w2 := watchRevs(wctx, sc, "/w/", r.status(0).Since+1)
	w2.check(t, level, writers...)
	watch.check(t, level, writers...)
	for i := range r.Store {
		st := r.status(i)
		if st.Mode != api.Mirror || st.Failed != "" || st.Lag != 0 || st.PeerError != "" {
			t.Errorf("member %s: status %+v", r.Store[i].Name, st)
		}
	}
	t.Logf("%d keys identical on etcd and %d store members at revision %d; %d acknowledged writes kept", n, len(r.Store), level, acked)
}
