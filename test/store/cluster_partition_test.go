package storee2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestClusterPartition cuts one member off (first a follower, then the
// leader) with proxies in front of the peer listeners. The cut-off member
// must refuse writes and linearizable reads with etcd's Unavailable errors
// and never answer a linearizable read with a value older than one the
// majority acknowledged meanwhile; the majority keeps serving; after the
// heal the member catches up.
func TestClusterPartition(t *testing.T) {
	part := newPartition()
	backends := map[int]string{}
	advertise := map[int]string{}
	var proxies []*peerProxy
	for i := 1; i <= 3; i++ {
		backends[i] = "http://" + freeAddr(t)
		pp := part.newProxy(t, backends[i])
		proxies = append(proxies, pp)
		advertise[i] = pp.URL
	}
	c := startClusterWithListen(t, 3, clusterOptions{PlainPeers: true, AdvertisePeer: advertise}, backends)
	for i, m := range c.Members {
		st, err := memberStatus(m)
		if err != nil {
			t.Fatalf("status of %s: %v", m.Name, err)
		}
		proxies[i].target = strconv.FormatUint(st.Header.MemberId, 16)
	}
	for round, pick := range []string{"follower", "leader"} {
		li := c.leader(10 * time.Second)
		victim := (li + 1) % 3
		if pick == "leader" {
			victim = li
		}
		partitionRound(t, c, part, proxies[victim].target, victim, fmt.Sprintf("round%d", round))
	}
}

func partitionRound(t *testing.T, c *cluster, part *partition, id string, victim int, key string) {
	m := c.Members[victim]
	mc := m.Client()
	defer mc.Close()
	all := c.Client()
	defer all.Close()
	put(t, all, key, "before")
	part.isolate(id)
	t.Logf("%s: isolated %s (member %s)", key, m.Name, id)
	// The majority elects a leader if needed and takes a write.
	majority := c.Members[(victim+1)%3]
	deadline := time.Now().Add(30 * time.Second)
	for {
		mj := majority.Client()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := mj.Put(ctx, key, "after")
		cancel()
		mj.Close()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the majority takes no write while %s is cut off: %v", key, m.Name, err)
		}
	}
	// The cut-off member: writes and linearizable reads fail with Unavailable,
	// and no linearizable read returns "before". A write fails at once ("no
	// leader"); a linearizable read waits for a ReadIndex that never comes
	// until its deadline: 4 s shows a stale answer as surely as the 15 s it
	// had (one would come at once, from the member's own state) and keeps
	// the test from spending 90 s on deadlines.
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		_, perr := mc.Put(ctx, key+"/cut", "x")
		cancel()
		ctx, cancel = context.WithTimeout(context.Background(), 4*time.Second)
		resp, gerr := mc.Get(ctx, key)
		cancel()
		if perr == nil {
			t.Fatalf("%s: cut-off member %s acknowledged a write", key, m.Name)
		}
		if gerr == nil {
			if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "after" {
				t.Fatalf("%s: cut-off member %s answered a linearizable read with stale data %v", key, m.Name, resp.Kvs)
			}
		}
		t.Logf("%s: cut-off %s: put -> %v; linearizable get -> %v", key, m.Name, errText(perr), errText(gerr))
		for _, err := range []error{perr, gerr} {
			if err != nil && grpcCode(err) != codes.Unavailable && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s: cut-off member %s: error %v is not etcd's Unavailable", key, m.Name, err)
			}
		}
	}
	if _, err := mc.Get(context.Background(), key, clientv3.WithSerializable()); err != nil {
		t.Fatalf("%s: serializable read on the cut-off member: %v", key, err)
	}
	part.heal()
	deadline = time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := mc.Get(ctx, key)
		cancel()
		if err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "after" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s did not catch up after the heal: %v %v", key, m.Name, resp, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.waitCaughtUp(30 * time.Second)
	c.checkSameState(0)
}

func put(t *testing.T, cl *clientv3.Client, k, v string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := cl.Put(ctx, k, v); err != nil {
		t.Fatalf("put %s: %v", k, err)
	}
}

// putRetry puts k=v, retrying for up to 30 s: right after a member dies, a
// write forwarded to it times out (as with etcd: "request timed out,
// possibly due to previous leader failure"); the cluster must take it again.
func putRetry(t *testing.T, cl *clientv3.Client, k, v string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cl.Put(ctx, k, v)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("put %s: the cluster takes no writes: %v", k, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// grpcCode is the gRPC code of an error as clientv3 returns it (an
// rpctypes.EtcdError or a status).
func grpcCode(err error) codes.Code {
	var ee interface{ Code() codes.Code }
	if errors.As(err, &ee) {
		return ee.Code()
	}
	return status.Code(err)
}
