package mirror

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// laggingTarget lists no lease, as a restored etcd member still catching up
// on the raft log answers LeaseLeases (a local read) for leases granted
// since its snapshot.
type laggingTarget struct{ *etcdTarget }

func (laggingTarget) Leases(context.Context) (map[int64]bool, error) { return map[int64]bool{}, nil }

// TestReplayKeepsTheSourcesLeasesAlive: a replay run that begins after
// another (which granted lease L on etcd) lists etcd's leases from a member
// that lacks L; L is the source's, so the run renews it anyway, and etcd
// does not expire it (which would make a revision the source never made).
func TestReplayKeepsTheSourcesLeasesAlive(t *testing.T) {
	ctx := context.Background()
	cli := startEtcd(t)
	st := openStore(t)
	const id, ttl = 0x51, 3
	if _, _, err := st.LeaseGrant(ctx, id, 600); err != nil {
		t.Fatal(err)
	}
	if _, err := pb.NewLeaseClient(cli.ActiveConnection()).LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: id, TTL: ttl}); err != nil { // the last run's grant
		t.Fatal(err)
	}
	alive := newKeepAlives(cli)
	defer alive.close()
	r := &Replayer{Source: &storeSource{st: st}, Target: laggingTarget{newEtcdTarget(cli, "etcd", alive)}, Since: 1, Log: testLog()}
	stop := runReplayer(t, r)
	time.Sleep(3 * ttl * time.Second)
	if err := stop(); err != nil {
		t.Fatalf("replayer: %v", err)
	}
	live, err := cli.TimeToLive(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if live.TTL <= 0 {
		t.Fatalf("lease %x expired on etcd (TTL %d) although the source holds it", id, live.TTL)
	}
}

// TestEtcdTargetChecksARevisionAppliedBefore: a revision whose compare fails
// with etcd at or past it counts as applied before only if etcd's revision
// holds the source's change.
func TestEtcdTargetChecksARevisionAppliedBefore(t *testing.T) {
	ctx := context.Background()
	cli := startEtcd(t)
	alive := newKeepAlives(cli)
	defer alive.close()
	tgt := newEtcdTarget(cli, "etcd", alive)
	put, err := cli.Put(ctx, "a", "1")
	if err != nil {
		t.Fatal(err)
	}
	rev := put.Header.Revision
	same := Change{Rev: rev, Events: []*mvccpb.Event{{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte("a"), Value: []byte("1"), CreateRevision: rev, ModRevision: rev, Version: 1}}}}
	if got, err := tgt.Apply(ctx, Batch{Changes: []Change{same}}); err != nil || got != rev {
		t.Fatalf("the same revision again: got %d, %v; want %d, nil", got, err, rev)
	}
	// etcd deletes "a" by itself; the source's next revision updates it.
	del, err := cli.Delete(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	next := del.Header.Revision
	other := Change{Rev: next, Events: []*mvccpb.Event{{Type: mvccpb.PUT,
		Kv:     &mvccpb.KeyValue{Key: []byte("a"), Value: []byte("2"), CreateRevision: rev, ModRevision: next, Version: 2},
		PrevKv: &mvccpb.KeyValue{Key: []byte("a"), Value: []byte("1"), CreateRevision: rev, ModRevision: rev, Version: 1}}}}
	if _, err := tgt.Apply(ctx, Batch{Changes: []Change{other}}); !errors.Is(err, ErrDiverged) {
		t.Fatalf("etcd's own revision taken for the source's: err %v, want a divergence", err)
	}
}
