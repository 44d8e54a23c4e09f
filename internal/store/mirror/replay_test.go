package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

func testLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// asMirror puts st in a mode that takes replayed revisions (as Start does).
func asMirror(t *testing.T, st *mvcc.Store) *mvcc.Store {
	t.Helper()
	epoch, _ := st.Mode()
	if err := st.ChangeMode(context.Background(), record{Mode: api.Mirror}.change(epoch, 0)); err != nil {
		t.Fatal(err)
	}
	return st
}

// runReplayer runs r in the background; stop waits for it and returns its error.
func runReplayer(t *testing.T, r *Replayer) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	return func() error {
		cancel()
		err := <-errc
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
}

func waitRev(t *testing.T, what string, rev func() int64, want int64, errc func() error) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return rev() >= want, nil
	})
	if err != nil {
		t.Fatalf("%s at revision %d, want %d: %v", what, rev(), want, err)
	}
}

// writeMix makes every kind of change: puts, a multi-key transaction, a
// delete range, a lease with keys, its revoke, a put with a lease granted
// and revoked on its own.
func writeMix(t *testing.T, ctx context.Context, kv clientv3.KV, lease clientv3.Lease, round int) {
	t.Helper()
	must := func(what string, err error) {
		if err != nil {
			t.Fatalf("round %d: %s: %v", round, what, err)
		}
	}
	p := fmt.Sprintf("/r%d/", round)
	for i := 0; i < 20; i++ {
		_, err := kv.Put(ctx, fmt.Sprintf("%sk%02d", p, i), fmt.Sprintf("v%d", i))
		must("put", err)
	}
	_, err := kv.Put(ctx, p+"k03", "again")
	must("put again", err)
	_, err = kv.Txn(ctx).Then(clientv3.OpPut(p+"t1", "a"), clientv3.OpPut(p+"t2", "b"), clientv3.OpDelete(p+"k04")).Commit()
	must("txn", err)
	_, err = kv.Delete(ctx, p+"k1", clientv3.WithPrefix())
	must("delete prefix", err)
	l, err := lease.Grant(ctx, 600)
	must("grant", err)
	for i := 0; i < 5; i++ {
		_, err = kv.Put(ctx, fmt.Sprintf("%sleased%d", p, i), "x", clientv3.WithLease(l.ID))
		must("put leased", err)
	}
	l2, err := lease.Grant(ctx, 300)
	must("grant 2", err)
	_, err = kv.Put(ctx, p+"keep", "y", clientv3.WithLease(l2.ID))
	must("put keep", err)
	_, err = lease.Revoke(ctx, l.ID)
	must("revoke", err)
}

func TestReplayEtcdToStore(t *testing.T) {
	ctx := context.Background()
	cli := startEtcd(t)
	st := asMirror(t, openStore(t))
	prog := &Progress{}
	r := &Replayer{Source: &etcdSource{cli: cli, name: "etcd"}, Target: &storeTarget{st: st, m: Single{}}, Since: 1, Log: testLog(), Progress: prog, SweepEvery: 100 * time.Millisecond}
	stop := runReplayer(t, r)
	writeMix(t, ctx, cli, cli, 1)
	rev, _ := etcdRev(ctx, cli)
	waitRev(t, "store", st.Rev, rev, nil)
	if err := stop(); err != nil {
		t.Fatalf("replayer: %v", err)
	}
	// Resume from where the store is, with more writes meanwhile.
	writeMix(t, ctx, cli, cli, 2)
	stop = runReplayer(t, r)
	rev, _ = etcdRev(ctx, cli)
	waitRev(t, "store", st.Rev, rev, nil)
	for _, at := range []int64{rev / 2, rev - 3, rev} {
		sameKVs(t, fmt.Sprintf("at %d", at), storeKVs(t, st, at), allKVs(t, cli, at))
	}
	// Revoked leases go once the sweep sees them gone.
	_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return len(st.Leases()) == 2, nil
	}) // a timeout is reported by the comparison below
	ls, _ := cli.Leases(ctx)
	if len(st.Leases()) != len(ls.Leases) {
		t.Errorf("store has leases %x, etcd %v", st.Leases(), ls.Leases)
	}
	if err := stop(); err != nil {
		t.Fatalf("replayer: %v", err)
	}
}

func TestReplayStoreToEtcd(t *testing.T) {
	ctx := context.Background()
	cli := startEtcd(t)
	st := openStore(t)
	kv := serveStore(t, st, nil)
	alive := newKeepAlives(cli)
	defer alive.close()
	tgt := newEtcdTarget(cli, "etcd", alive)
	r := &Replayer{Source: &storeSource{st: st}, Target: tgt, Since: 1, Log: testLog(), SweepEvery: 100 * time.Millisecond}
	stop := runReplayer(t, r)
	writeMix(t, ctx, kv, kv, 1)
	// A lease with more keys than etcd takes in one transaction, revoked:
	// replayed as etcd's own revoke.
	l, err := kv.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if _, err := kv.Put(ctx, fmt.Sprintf("/big/%03d", i), "v", clientv3.WithLease(l.ID)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kv.Revoke(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	waitRev(t, "etcd", func() int64 { r, _ := etcdRev(ctx, cli); return r }, st.Rev(), nil)
	rev := st.Rev()
	for _, at := range []int64{rev / 2, rev - 1, rev} {
		sameKVs(t, fmt.Sprintf("at %d", at), allKVs(t, cli, at), storeKVs(t, st, at))
	}
	if err := stop(); err != nil {
		t.Fatalf("replayer: %v", err)
	}
}

// differentAtRevision2 returns an etcd and a store (a mirror) both at
// revision 2, each holding a key the other does not.
func differentAtRevision2(t *testing.T) (*clientv3.Client, *mvcc.Store) {
	t.Helper()
	ctx := context.Background()
	cli := startEtcd(t)
	st := openStore(t)
	if _, err := st.Put(ctx, putReq("/only-in-store", "x")); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/only-in-etcd", "y"); err != nil {
		t.Fatal(err)
	}
	return cli, asMirror(t, st)
}

func TestReplayDivergence(t *testing.T) {
	ctx := context.Background()
	cli, st := differentAtRevision2(t)
	// Same revision, different state: refused (the comparison runs beside
	// the replay; TestReplayStopsWhenItsStartIsFoundDifferent).
	r := &Replayer{Source: &etcdSource{cli: cli, name: "etcd"}, Target: &storeTarget{st: st, m: Single{}}, Since: 2, Log: testLog()}
	err := r.Run(ctx)
	if !errors.Is(err, ErrDiverged) || !isFatal(err) {
		t.Fatalf("replay onto a different state: %v, want a divergence", err)
	}
	t.Logf("refused: %v", err)
	// Replaying from an identical start, then a change made on the target
	// behind the replayer's back: the next revision does not apply.
	st2 := asMirror(t, openStore(t))
	cli2 := startEtcd(t)
	r2 := &Replayer{Source: &etcdSource{cli: cli2, name: "etcd"}, Target: &storeTarget{st: st2, m: Single{}}, Since: 1, Log: testLog()}
	errc := make(chan error, 1)
	go func() {
		// As the controller does: a replay that stops on a retryable error
		// runs again (and checks the state before it goes on).
		for {
			err := r2.Run(ctx)
			if isFatal(err) || ctx.Err() != nil {
				errc <- err
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	if _, err := cli2.Put(ctx, "/a", "1"); err != nil {
		t.Fatal(err)
	}
	waitRev(t, "store", st2.Rev, 2, nil)
	if _, err := st2.Put(ctx, putReq("/a", "behind the back")); err != nil {
		t.Fatal(err)
	}
	if _, err := cli2.Put(ctx, "/b", "2"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !isFatal(err) {
			t.Fatalf("replay after a change on the target: %v, want a fatal error", err)
		}
		t.Logf("stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the replayer went on after the target diverged")
	}
}

func TestReplaySourceCompacted(t *testing.T) {
	ctx := context.Background()
	cli := startEtcd(t)
	st := openStore(t)
	for i := 0; i < 5; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("/k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Compact(ctx, 4); err != nil {
		t.Fatal(err)
	}
	r := &Replayer{Source: &etcdSource{cli: cli, name: "etcd"}, Target: &storeTarget{st: st, m: Single{}}, Since: 1, Log: testLog()}
	err := r.Run(ctx)
	var ce *SourceCompactedError
	if !errors.As(err, &ce) || !isFatal(err) {
		t.Fatalf("replay from a compacted revision: %v, want a SourceCompactedError", err)
	}
	t.Logf("refused: %v", err)
}

func putReq(k, v string) *pb.PutRequest { return &pb.PutRequest{Key: []byte(k), Value: []byte(v)} }

var _ = mvcc.ErrCompacted

// TestReplayRefusedOutsideMirror: replayed revisions never apply to a store
// whose mode does not take them (a batch proposed by a replay that a
// cut-over ended); lease grants alone still do.
func TestReplayRefusedOutsideMirror(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	txn := &mvcc.ReplayBatch{Txns: []mvcc.ReplayTxn{{Rev: 2, Txn: (&Change{Rev: 2}).Txn()}}}
	if _, err := st.Replay(ctx, txn); !errors.Is(err, mvcc.ErrNotReplaying) {
		t.Fatalf("replay into an owner: %v, want ErrNotReplaying", err)
	}
	if _, err := st.Replay(ctx, &mvcc.ReplayBatch{Grants: []mvcc.LeaseGrant{{ID: 7, TTL: 30}}}); err != nil || !st.HasLease(7) {
		t.Fatalf("lease grant into an owner: %v", err)
	}
}
