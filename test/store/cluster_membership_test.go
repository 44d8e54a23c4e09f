package storee2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// addMember adds a member through the Cluster API (as etcdctl member add
// does), starts it with --initial-cluster-state existing and waits until it
// serves serializable reads (a learner serves no linearizable ones).
func (c *cluster) addMember(t *testing.T, learner bool) (*server, uint64) {
	t.Helper()
	peer := c.scheme() + freeAddr(t)
	cl := c.Client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var resp *clientv3.MemberAddResponse
	var err error
	for {
		if learner {
			resp, err = cl.MemberAddAsLearner(ctx, []string{peer})
		} else {
			resp, err = cl.MemberAdd(ctx, []string{peer})
		}
		// etcd refuses changes until its members have been connected for 5 s
		// and a voter until the last one added has started.
		if err == nil || !retryableReconfig(err) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("member add %s (learner %v): %v", peer, learner, err)
	}
	m := c.newMember(len(c.Members)+1, peer, peer, c.Members[0].opts)
	var initial []string
	for _, o := range c.Members {
		if o.PID() != 0 {
			initial = append(initial, o.Name+"="+advertised(o))
		}
	}
	initial = append(initial, m.Name+"="+peer)
	m.clusterArgs = append(m.clusterArgs, "--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "existing")
	c.Members = append(c.Members, m)
	m.startProc()
	waitServes(t, m)
	return m, resp.Member.ID
}

// advertised is the peer URL a member advertises (its flag value).
func advertised(m *server) string {
	for i, a := range m.clusterArgs {
		if a == "--initial-advertise-peer-urls" {
			return m.clusterArgs[i+1]
		}
	}
	return m.peerURL
}

// waitServes waits until m answers a serializable Range.
func waitServes(t *testing.T, m *server) {
	t.Helper()
	cl := m.Client()
	defer cl.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cl.Get(ctx, "probe", clientv3.WithSerializable())
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not serve: %v", m.Name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitHasKeys waits until m holds n keys under prefix (serializable).
func waitHasKeys(t *testing.T, m *server, prefix string, n int) {
	t.Helper()
	cl := m.Client()
	defer cl.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cl.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
		cancel()
		if err == nil && resp.Count == int64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %v keys under %s, want %d (%v)", m.Name, resp, prefix, n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// retryableReconfig reports whether a member change was refused by
// --strict-reconfig-check for a reason that passes (members connected for
// less than 5 s, a new member not started yet).
func retryableReconfig(err error) bool {
	return strings.Contains(err.Error(), "unhealthy cluster") || strings.Contains(err.Error(), "not enough started members")
}

// promote promotes a learner once it has caught up, asking a voter that
// does not lead: it forwards the request to the leader (etcd does).
func (c *cluster) promote(t *testing.T, id uint64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		li := c.leader(10 * time.Second)
		var via *server
		for i, m := range c.Members {
			if st, err := memberStatus(m); i != li && err == nil && !st.IsLearner {
				via = m
				break
			}
		}
		if via == nil {
			t.Fatal("no follower to ask for the promote")
		}
		fc := via.Client()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := fc.MemberPromote(ctx, id)
		cancel()
		fc.Close()
		if err == nil {
			t.Logf("promoted %x through the follower %s", id, via.Name)
			return
		}
		if !strings.Contains(err.Error(), "in sync with leader") || time.Now().After(deadline) {
			t.Fatalf("promote %x through the follower %s: %v", id, via.Name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestClusterMembership: with data and a lease in a 3-member cluster whose
// log was truncated (snapshot-count 100), a learner is added, catches up from
// a state snapshot, refuses writes, is promoted, and a founding member is
// removed; the cluster serves throughout and every member holds the same
// state.
func TestClusterMembership(t *testing.T) {
	c := startCluster(t, 3, clusterOptions{serverOptions: serverOptions{ExtraArgs: []string{"--snapshot-count", "100"}}})
	cl := c.Client()
	defer cl.Close()
	lease, err := cl.Grant(context.Background(), 3600)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500; i++ {
		put(t, cl, fmt.Sprintf("mem/%03d", i), strings.Repeat("v", 200))
	}
	if _, err := cl.Put(context.Background(), "mem/leased", "x", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	m4, id := c.addMember(t, true)
	waitHasKeys(t, m4, "mem/", 501)
	mc := m4.Client()
	if _, err := mc.Put(context.Background(), "mem/on-learner", "x"); err == nil {
		t.Fatalf("the learner %s acknowledged a write", m4.Name)
	} else {
		t.Logf("a write on the learner: %v", err)
	}
	mc.Close()
	c.promote(t, id)
	t.Logf("learner %x caught up and promoted", id)
	put(t, cl, "mem/after-promote", "x")
	// Remove a founding member that is not the leader.
	li := c.leader(10 * time.Second)
	victim := c.Members[(li+1)%3]
	st, err := memberStatus(victim)
	if err != nil {
		t.Fatal(err)
	}
	lc := c.Members[li].Client()
	if _, err := lc.MemberRemove(context.Background(), st.Header.MemberId); err != nil {
		t.Fatalf("member remove %s: %v", victim.Name, err)
	}
	lc.Close()
	select {
	case <-victim.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("removed member %s kept running", victim.Name)
	}
	victim.Kill9()
	t.Logf("removed %s: %s", victim.Name, lastErrorLine(t, victim.logPath))
	cl2 := c.Client()
	defer cl2.Close()
	ml, err := cl2.MemberList(context.Background())
	if err != nil || len(ml.Members) != 3 {
		t.Fatalf("member list after the removal: %v %v", ml, err)
	}
	put(t, cl2, "mem/after-remove", "x")
	c.waitCaughtUp(30 * time.Second)
	c.checkSameState(0)
	ttl, err := m4.Client().TimeToLive(context.Background(), lease.ID, clientv3.WithAttachedKeys())
	if err != nil || ttl.TTL <= 0 || len(ttl.Keys) != 1 {
		t.Fatalf("lease on the new member: %v %v", ttl, err)
	}
}

// TestClusterGrowFromSingle: a single store's data dir (data, a lease,
// history) becomes the first member of a cluster and grows to 3 members
// with member add; revisions stay, every member holds the same state.
func TestClusterGrowFromSingle(t *testing.T) {
	c := startClusterDeferred(t, 1, clusterOptions{})
	first := c.Members[0]
	clusterArgs := first.clusterArgs
	if first.Kind == "store" {
		first.clusterArgs = []string{} // no peer flags: a single store, no raft
		first.Start()
	} else {
		first.Start()
	}
	cl := first.Client()
	for i := 0; i < 300; i++ {
		put(t, cl, fmt.Sprintf("grow/%03d", i), fmt.Sprintf("v%d", i))
	}
	lease, err := cl.Grant(context.Background(), 3600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Put(context.Background(), "grow/leased", "x", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	before, err := cl.Get(context.Background(), "grow/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if first.Kind == "store" {
		if _, err := first.Stop(15 * time.Second); err != nil {
			t.Fatalf("stop the single store: %v", err)
		}
		first.clusterArgs = clusterArgs
		first.Start()
	}
	m2, _ := c.addMember(t, false)
	m3, _ := c.addMember(t, false)
	for _, m := range []*server{first, m2, m3} {
		waitHasKeys(t, m, "grow/", 301)
	}
	c.waitCaughtUp(30 * time.Second)
	c.checkSameState(before.Header.Revision)
	mc := m3.Client()
	defer mc.Close()
	after, err := mc.Get(context.Background(), "grow/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for i, kv := range before.Kvs {
		a := after.Kvs[i]
		if string(a.Key) != string(kv.Key) || a.ModRevision != kv.ModRevision || a.CreateRevision != kv.CreateRevision || a.Version != kv.Version {
			t.Fatalf("%s changed while growing: %v -> %v", kv.Key, kv, a)
		}
	}
	ttl, err := mc.TimeToLive(context.Background(), lease.ID)
	if err != nil || ttl.TTL <= 0 {
		t.Fatalf("lease after growing: %v %v", ttl, err)
	}
	t.Logf("grew 1 -> 3 members at revision %d; %d keys with their revisions on the third member", after.Header.Revision, len(after.Kvs))
}
