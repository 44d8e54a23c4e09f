package mirror

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

// startController runs a controller on a single store with its etcd API
// served in-process.
func startController(t *testing.T) (*Controller, *clientv3.Client) {
	t.Helper()
	st := openStore(t)
	c := New(st, Single{MemberID: 1}, testLog())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; c.Stop() })
	return c, serveStore(t, st, c)
}

func endpointsOf(cli *clientv3.Client) api.Peer { return api.Peer{Endpoints: cli.Endpoints()} }

// TestMirrorLifecycle runs every mode and transition on one store against
// an in-process etcd: mirror it (writes through the store land in etcd, with
// the same revisions on both sides), cut over, replay back onto it, cut back.
func TestMirrorLifecycle(t *testing.T) {
	ctx := context.Background()
	etcd := startEtcd(t)
	c, qk := startController(t)
	if _, err := c.Start(ctx, &api.StartRequest{Source: endpointsOf(etcd), Revision: 1}); err != nil {
		t.Fatalf("start: %v", err)
	}
	// Idempotent.
	if _, err := c.Start(ctx, &api.StartRequest{Source: endpointsOf(etcd)}); err != nil {
		t.Fatalf("start again: %v", err)
	}
	resp, err := qk.Put(ctx, "/via-store", "1")
	if err != nil {
		t.Fatalf("forwarded put: %v", err)
	}
	got, err := qk.Get(ctx, "/via-store", clientv3.WithSerializable())
	if err != nil || len(got.Kvs) != 1 || got.Kvs[0].ModRevision != resp.Header.Revision {
		t.Fatalf("read own forwarded write: %v %v (put at %d)", got, err, resp.Header.Revision)
	}
	inEtcd, _ := etcd.Get(ctx, "/via-store")
	if len(inEtcd.Kvs) != 1 || inEtcd.Kvs[0].ModRevision != resp.Header.Revision {
		t.Fatalf("forwarded write not in etcd at its revision: %v", inEtcd.Kvs)
	}
	if _, err := etcd.Put(ctx, "/direct", "2"); err != nil {
		t.Fatal(err)
	}
	lin, err := qk.Get(ctx, "/direct")
	if err != nil || len(lin.Kvs) != 1 {
		t.Fatalf("linearizable read on the mirror after an etcd write: %v %v", lin, err)
	}
	l, err := qk.Grant(ctx, 60)
	if err != nil {
		t.Fatalf("forwarded grant: %v", err)
	}
	if _, err := qk.Put(ctx, "/leased", "x", clientv3.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	writeMix(t, ctx, qk, qk, 1)
	writeMix(t, ctx, etcd, etcd, 2)

	stopW, writes := writeLoop(t, qk, "/w1/")
	waitWrites(t, writes, writes()+loopWrites)
	res, err := c.Cutover(ctx, &api.TransitionRequest{Timeout: 5 * time.Second})
	acked := stopW()
	if err != nil {
		t.Fatalf("cutover: %v", err)
	}
	if err := c.st.WaitRev(ctx, c.st.Rev()); err != nil {
		t.Fatal(err)
	}
	t.Logf("cut-over: %+v (pause %v); %d writes acknowledged around it", res, res.Pause.Duration, acked)
	e := res.Pause.Revision
	// The lease granted through the mirror kept its id and its key, and has
	// its full TTL again.
	ttl, err := qk.TimeToLive(ctx, l.ID, clientv3.WithAttachedKeys())
	if err != nil || ttl.TTL < 55 || ttl.GrantedTTL != 60 || len(ttl.Keys) != 1 {
		t.Fatalf("lease %x after the cut-over: %+v %v; want 60 s granted, nearly all left, /leased attached", l.ID, ttl, err)
	}
	sameKVs(t, "at the cut-over", storeKVs(t, c.st, e), allKVs(t, etcd, e))
	if again, err := c.Cutover(ctx, &api.TransitionRequest{}); err != nil || !again.AlreadyDone {
		t.Fatalf("cutover again: %+v %v", again, err)
	}
	if rev, _ := etcdRev(ctx, etcd); rev != e {
		t.Fatalf("etcd moved to %d after the cut-over at %d (writes went on there)", rev, e)
	}
	if _, err := c.ReplayTo(ctx, &api.ReplayToRequest{Target: endpointsOf(etcd), Revision: e}); err != nil {
		t.Fatalf("replay-to: %v", err)
	}
	writeMix(t, ctx, qk, qk, 3)
	stopW, writes = writeLoop(t, qk, "/w2/")
	waitWrites(t, writes, writes()+loopWrites)
	back, err := c.Cutback(ctx, &api.TransitionRequest{Timeout: 5 * time.Second})
	acked = stopW()
	if err != nil {
		t.Fatalf("cutback: %v", err)
	}
	t.Logf("cut-back: %+v (pause %v); %d writes acknowledged around it", back, back.Pause.Duration, acked)
	writeMix(t, ctx, qk, qk, 4)
	rev, _ := etcdRev(ctx, etcd)
	waitRev(t, "store", c.st.Rev, rev, nil)
	sameKVs(t, "after the cut-back", storeKVs(t, c.st, rev), allKVs(t, etcd, rev))
	sameKVs(t, "at the cut-back", storeKVs(t, c.st, back.Pause.Revision), allKVs(t, etcd, back.Pause.Revision))
	s, _ := c.Status(ctx, nil)
	if s.Mode != api.Mirror || s.Lag != 0 || s.Failed != "" {
		t.Fatalf("status after the cut-back: %+v", s)
	}
}

// loopWrites is how many acknowledged writes of a writeLoop show that
// writers are going on.
const loopWrites = 20

// waitWrites waits until count (a writeLoop's) reaches n.
func waitWrites(t *testing.T, count func() int, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return count() >= n, nil
	})
	if err != nil {
		t.Fatalf("writes stalled at %d acknowledged, want %d: %v", count(), n, err)
	}
}

// writeLoop puts keys through cli until stopped; stop returns how many were
// acknowledged, each checked readable, and count how many are so far.
func writeLoop(t *testing.T, cli *clientv3.Client, prefix string) (stop func() int, count func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]int64{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			k := fmt.Sprintf("%s%05d", prefix, i)
			wctx, c2 := context.WithTimeout(ctx, 10*time.Second)
			r, err := cli.Put(wctx, k, "v")
			c2()
			if err == nil {
				mu.Lock()
				acked[k] = r.Header.Revision
				mu.Unlock()
			}
			time.Sleep(time.Millisecond) // a rate the replay into etcd keeps up with
		}
	}()
	count = func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	return func() int {
		cancel()
		wg.Wait()
		for k, rev := range acked {
			g, err := cli.Get(context.Background(), k)
			if err != nil || len(g.Kvs) != 1 || g.Kvs[0].ModRevision != rev {
				t.Errorf("acknowledged write %s at %d: read %v %v", k, rev, g, err)
			}
		}
		return len(acked)
	}, count
}

// TestCutoverAbandoned: a cut-over that cannot finish within its timeout is
// abandoned: the call says so, the store still mirrors, and the writes held
// meanwhile go on to the source and are acknowledged.
func TestCutoverAbandoned(t *testing.T) {
	ctx := context.Background()
	etcd := startEtcd(t)
	c, qk := startController(t)
	if _, err := c.Start(ctx, &api.StartRequest{Source: endpointsOf(etcd)}); err != nil {
		t.Fatal(err)
	}
	c.beforeSwitch = func() { time.Sleep(600 * time.Millisecond) }
	stop, writes := writeLoop(t, qk, "/held/")
	waitWrites(t, writes, writes()+loopWrites)
	_, err := c.Cutover(ctx, &api.TransitionRequest{Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "abandoned") {
		t.Fatalf("cutover past its timeout: %v, want it abandoned", err)
	}
	t.Logf("refused: %v", statusMessage(err))
	waitWrites(t, writes, writes()+loopWrites) // writes go on after the abandon
	acked := stop()
	s, _ := c.Status(ctx, nil)
	if s.Mode != api.Mirror || s.Hold != nil || !strings.Contains(s.LastAbort, "abandoned") {
		t.Fatalf("status after the abandon: %+v", s)
	}
	rev, _ := etcdRev(ctx, etcd)
	waitRev(t, "store", c.st.Rev, rev, nil)
	sameKVs(t, "after the abandon", storeKVs(t, c.st, rev), allKVs(t, etcd, rev))
	t.Logf("%d writes acknowledged across the abandoned cut-over, all in etcd and the store", acked)
	c.beforeSwitch = nil
	if _, err := c.Cutover(ctx, &api.TransitionRequest{}); err != nil {
		t.Fatalf("cutover again: %v", err)
	}
}

// TestStatusPeerFiles: a member that cannot read the peer's files says which
// in its status.
func TestStatusPeerFiles(t *testing.T) {
	ctx := context.Background()
	etcd := startEtcd(t)
	c, _ := startController(t)
	ca := t.TempDir() + "/ca.crt"
	if err := os.WriteFile(ca, []byte("not used over http"), 0o600); err != nil {
		t.Fatal(err)
	}
	peer := endpointsOf(etcd)
	peer.CAFile = ca
	if _, err := c.Start(ctx, &api.StartRequest{Source: peer}); err != nil {
		t.Fatal(err)
	}
	if s, _ := c.Status(ctx, nil); s.PeerError != "" {
		t.Fatalf("status with readable files: %+v", s)
	}
	if err := os.Remove(ca); err != nil {
		t.Fatal(err)
	}
	s, _ := c.Status(ctx, nil)
	if !strings.Contains(s.PeerError, "--source-cacert "+ca+" cannot be read here") {
		t.Fatalf("status after the CA file went: peer error %q", s.PeerError)
	}
	t.Logf("peer error: %s", s.PeerError)
}
