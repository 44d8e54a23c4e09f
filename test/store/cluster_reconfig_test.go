package storee2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestClusterStrictReconfig: with one of 3 members killed, member changes
// that would break the active quorum are refused as etcd's
// --strict-reconfig-check (its default) refuses them — adding a voter, or
// removing a live one, "unhealthy cluster" — while removing the dead member
// is allowed.
func TestClusterStrictReconfig(t *testing.T) {
	c := startCluster(t, 3, clusterOptions{})
	li := c.leader(20 * time.Second)
	dead, live := c.Members[(li+1)%3], c.Members[(li+2)%3]
	deadSt, err := memberStatus(dead)
	if err != nil {
		t.Fatal(err)
	}
	liveSt, err := memberStatus(live)
	if err != nil {
		t.Fatal(err)
	}
	dead.Kill9()
	lc := c.Members[li].Client()
	defer lc.Close()
	expectRefused := func(what string, op func(context.Context) error) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := op(ctx)
			cancel()
			if err != nil && strings.Contains(err.Error(), "unhealthy cluster") {
				t.Logf("%s with a member down: %v", what, err)
				return
			}
			if err == nil || time.Now().After(deadline) {
				t.Fatalf("%s with a member down: %v, want etcdserver: unhealthy cluster", what, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	expectRefused("member add", func(ctx context.Context) error {
		_, err := lc.MemberAdd(ctx, []string{c.scheme() + freeAddr(t)})
		return err
	})
	expectRefused("member remove of a live member", func(ctx context.Context) error {
		_, err := lc.MemberRemove(ctx, liveSt.Header.MemberId)
		return err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ml, err := lc.MemberRemove(ctx, deadSt.Header.MemberId)
	if err != nil {
		t.Fatalf("member remove of the dead member: %v", err)
	}
	if len(ml.Members) != 2 {
		t.Fatalf("after removing the dead member: %d members, want 2", len(ml.Members))
	}
}
