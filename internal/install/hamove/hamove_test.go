package hamove

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/internal/install/storemove"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

// writer puts a key every 20 ms through c and records the revision each
// put was acknowledged at.
type writer struct {
	mu    sync.Mutex
	acked map[string]int64
	last  time.Time
	gap   time.Duration
}

func (w *writer) run(ctx context.Context, c *clientv3.Client, prefix string, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			k := fmt.Sprintf("%s%06d", prefix, i)
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := c.Put(cctx, k, "v")
			cancel()
			if err == nil {
				w.mu.Lock()
				now := time.Now()
				if !w.last.IsZero() {
					w.gap = max(w.gap, now.Sub(w.last))
				}
				w.last = now
				w.acked[k] = resp.Header.Revision
				w.mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
}

// check: every acknowledged put is in c with the revision it was answered with.
func (w *writer) check(t *testing.T, c *clientv3.Client, prefix string) int {
	t.Helper()
	resp, err := c.Get(context.Background(), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]int64{}
	for _, kv := range resp.Kvs {
		have[string(kv.Key)] = kv.ModRevision
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, rev := range w.acked {
		if have[k] != rev {
			t.Errorf("acknowledged put %s at revision %d: found at %d", k, rev, have[k])
		}
	}
	return len(w.acked)
}

func (r *rig) run(i int, step string) {
	r.t.Helper()
	t0 := time.Now()
	if err := r.nodes[i].Run(context.Background(), step, false); err != nil {
		r.t.Fatalf("%s on node%d: %v", step, i+1, err)
	}
	r.t.Logf("%s on node%d: %v", step, i+1, time.Since(t0).Round(time.Millisecond))
}

func (r *rig) next(undo bool) *NodeStep {
	r.t.Helper()
	st, err := r.nodes[0].Status(context.Background(), undo)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Logf("status: %s", st.Phase)
	return st.Next
}

// wantNext waits (10 s at most: a member just started may not listen yet)
// until Status names step on node as the next one.
func (r *rig) wantNext(undo bool, node int, step string) {
	r.t.Helper()
	want := NodeStep{fmt.Sprintf("node%d", node+1), step}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := r.next(undo)
		if got != nil && *got == want {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("status says next %v, want %v", got, want)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func digest(t *testing.T, c *clientv3.Client, rev int64) storemove.Digest {
	t.Helper()
	d, err := storemove.EtcdDigest(context.Background(), c, rev, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestMoveAndBack runs every node step of install and undo on three nodes
// of real etcd and store members, the coordinator's order checked by
// Status before each; one node of each step type (the switches with the
// rig's stand-in API servers) goes through gauntlet: killed
// at the begin of every sub-step of its plan and failing after every one,
// each time rerun to done or put back. Writers go through etcd before the
// store exists and through the store across the cut-over and cut-back:
// every acknowledged write kept with its revision, etcd untouched by
// install, both sides identical after undo.
func TestMoveAndBack(t *testing.T) {
	r := newRig(t)
	r.startAPIServers()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	ec := r.etcdClient()
	defer ec.Close()
	lease, err := ec.Grant(ctx, 15)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		ec.Put(ctx, fmt.Sprintf("/registry/k%04d", i), strings.Repeat("x", 512))
	}
	ec.Put(ctx, "/registry/leased", "1", clientv3.WithLease(lease.ID))
	ctx1, stop1 := context.WithCancel(ctx) // etcd's own clients, until the cut-over
	var wg1 sync.WaitGroup
	ka, _ := ec.KeepAlive(ctx1, lease.ID)
	go func() {
		for range ka {
		}
	}()
	w1 := &writer{acked: map[string]int64{}}
	w1.run(ctx1, ec, "/w/etcd/", &wg1)

	r.wantNext(false, 0, StepFirst)
	r.gauntlet(0, StepFirst, func() {
		if _, err := os.Stat(r.nodes[0].Paths.DataDir); !os.IsNotExist(err) || r.units.running(r.nodes[0].Paths.Unit) {
			t.Fatalf("first rolled back, yet the data dir is there (%v) or the member runs", err)
		}
	})
	if err := r.nodes[0].Run(ctx, StepJoin, false); err == nil || !strings.Contains(err.Error(), "member already") {
		t.Fatalf("join on the first node: %v, want a refusal", err)
	}
	r.wantNext(false, 1, StepJoin)
	r.gauntlet(1, StepJoin, func() {
		sc := r.storeClient()
		defer sc.Close()
		ml, err := sc.MemberList(ctx)
		if err != nil || len(ml.Members) != 1 {
			t.Fatalf("join rolled back: members %v (%v), want 1", ml, err)
		}
	})
	r.wantNext(false, 2, StepJoin)
	r.run(2, StepJoin)
	if err := r.nodes[0].Run(ctx, StepCutover, false); err == nil || !strings.Contains(err.Error(), "still on etcd") {
		t.Fatalf("cutover with every API server on etcd: %v, want a refusal", err)
	}
	for i := range r.nodes {
		r.wantNext(false, i, StepSwitch)
		if i == 1 {
			r.gauntlet(i, StepSwitch, func() {
				if err := r.waitAPIServerOn(i, r.nodes[i].Paths.localEtcd()); err != nil {
					t.Fatalf("switch rolled back: %v", err)
				}
			})
		} else {
			r.run(i, StepSwitch)
		}
		if err := r.waitAPIServerOn(i, r.nodes[i].Paths.LocalURL()); err != nil {
			t.Fatalf("after switch: %v", err)
		}
	}
	// The API servers now write through the store (forwarded to etcd).
	sc := r.storeClient()
	defer sc.Close()
	w2 := &writer{acked: map[string]int64{}}
	w2.run(ctx, sc, "/w/store/", &wg)
	time.Sleep(time.Second)
	stop1()
	wg1.Wait()
	r.wantNext(false, 0, StepCutover)
	r.gauntlet(0, StepCutover, nil) // killed at the cut-over, its reruns finish it
	cut := r.nodes[0].LastPause
	if r.next(false) != nil {
		t.Fatal("status names a step after the cut-over")
	}
	t.Logf("cut-over at revision %d, writes held %v", cut.Revision, cut.Duration)
	time.Sleep(time.Second)
	if erev, err := revision(ctx, ec); err != nil || erev != cut.Revision {
		t.Fatalf("etcd at revision %d (%v) after the cut-over at %d: it was written after the switch", erev, err, cut.Revision)
	}
	if d1, d2 := digest(t, ec, cut.Revision), digest(t, sc, cut.Revision); d1 != d2 {
		t.Fatalf("at the cut-over revision %d: etcd %v, store %v", cut.Revision, d1, d2)
	}

	// Undo.
	for i := range r.nodes {
		r.wantNext(true, i, StepStopEtcd)
		if i == 0 {
			etcdManifest := filepath.Join(r.nodes[0].Paths.Manifests, "etcd.yaml")
			r.gauntlet(0, StepStopEtcd, func() {
				if _, err := os.Stat(etcdManifest); err != nil {
					t.Fatalf("stop-etcd rolled back, yet etcd's manifest is not back: %v", err)
				}
			})
			continue
		}
		r.run(i, StepStopEtcd)
	}
	r.wantNext(true, 0, StepReplayTo)
	r.gauntlet(0, StepReplayTo, func() {
		if st, _ := r.nodes[0].mirrorStatus(ctx); st == nil || st.Mode != api.Owner {
			t.Fatalf("replay-to rolled back: mode %v, want owner", st)
		}
	})
	// The second node fetches the snapshot from the first node's server
	// (after a failure that puts the fetched file back); the third is given
	// the first node's file with --snapshot.
	snap := r.nodes[0].Paths.replayedSnapshot()
	if !r.units.running(r.nodes[0].Paths.SnapshotUnit) {
		t.Fatalf("replay-to is done but its snapshot server (unit %s) does not run", r.nodes[0].Paths.SnapshotUnit)
	}
	r.nodes[2].Snapshot = snap
	for i := range r.nodes {
		r.wantNext(true, i, StepRestoreEtcd)
		if i == 1 {
			r.gauntlet(i, StepRestoreEtcd, func() {
				if _, err := os.Stat(r.nodes[i].Paths.replayedSnapshot()); err == nil {
					t.Fatalf("restore-etcd rolled back, but the snapshot it fetched is still in place")
				}
			})
			continue
		}
		r.run(i, StepRestoreEtcd)
	}
	if _, err := os.Stat(r.nodes[1].Paths.replayedSnapshot()); err != nil {
		t.Fatalf("restore-etcd on the second node did not fetch the snapshot: %v", err)
	}
	r.wantNext(true, 0, StepCutback)
	r.gauntlet(0, StepCutback, func() {
		if st, _ := r.nodes[0].mirrorStatus(ctx); st == nil || st.Mode != api.ReplayingTo {
			t.Fatalf("cutback rolled back: mode %v, want %s", st, api.ReplayingTo)
		}
	})
	if r.units.running(r.nodes[0].Paths.SnapshotUnit) {
		t.Fatalf("the snapshot server (unit %s) still runs after cutback", r.nodes[0].Paths.SnapshotUnit)
	}
	back := r.nodes[0].LastPause
	t.Logf("cut-back at revision %d, writes held %v", back.Revision, back.Duration)
	for i := range r.nodes {
		r.wantNext(true, i, StepSwitchBack)
		if i == 2 {
			r.gauntlet(i, StepSwitchBack, func() {
				if err := r.waitAPIServerOn(i, r.nodes[i].Paths.LocalURL()); err != nil {
					t.Fatalf("switch-back rolled back: %v", err)
				}
			})
		} else {
			r.run(i, StepSwitchBack)
		}
		if err := r.waitAPIServerOn(i, r.nodes[i].Paths.localEtcd()); err != nil {
			t.Fatalf("after switch-back: %v", err)
		}
	}
	time.Sleep(time.Second)
	cancel()
	wg.Wait()
	for i := 2; i >= 0; i-- {
		r.wantNext(true, i, StepLeave)
		if i == 2 {
			r.gauntlet(i, StepLeave, func() {})
			continue
		}
		r.run(i, StepLeave)
	}
	if nx := r.next(true); nx != nil {
		t.Fatalf("status names %v after undo", nx)
	}
	ec2 := r.etcdClient()
	defer ec2.Close()
	n1 := w1.check(t, ec2, "/w/etcd/")
	n2 := w2.check(t, ec2, "/w/store/")
	t.Logf("%d writes through etcd and %d through the store (longest gap %v) kept with their revisions in etcd after undo", n1, n2, w2.gap)
}
