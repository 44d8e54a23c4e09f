package storee2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

// mirrorCycles is QK_MIRROR_CYCLES: how many cut-over/cut-back cycles
// TestMirrorCutoverAndBack runs (for the spread of the pauses; default 1).
func mirrorCycles() int {
	if n, err := strconv.Atoi(os.Getenv("QK_MIRROR_CYCLES")); err == nil && n > 0 {
		return n
	}
	return 1
}

// storeWriters starts one writer per store member (its own client), each
// checking it reads its writes on its member.
func (r *mirrorRig) storeWriters(ctx context.Context, wg *sync.WaitGroup, round string, every time.Duration) []*ackWriter {
	var ws []*ackWriter
	for i, m := range r.Store {
		mc := m.Client()
		r.t.Cleanup(func() { mc.Close() })
		w := newAckWriter(fmt.Sprintf("%s-via-%s", round, m.Name), mc, fmt.Sprintf("/w/%s/%d/", round, i), every)
		w.check = sees(mc, clientv3.WithSerializable())
		w.run(ctx, wg)
		ws = append(ws, w)
	}
	return ws
}

// transition runs `quantykube store mirror OP` and returns its result and
// the longest time no writer got an acknowledgement around it.
func (r *mirrorRig) transition(op string, writers []*ackWriter) (*api.TransitionResult, time.Duration) {
	r.t.Helper()
	start := time.Now()
	res := r.mirrorCmd(op, "--hold-timeout", "5s", "--json")
	end := time.Now()
	if res.Err != nil {
		r.t.Fatalf("mirror %s:\n%s", op, res)
	}
	var out api.TransitionResult
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil || out.Pause == nil {
		r.t.Fatalf("mirror %s printed %q: %v", op, res.Stdout, err)
	}
	time.Sleep(500 * time.Millisecond) // acknowledgements after the call count for the gap
	var gap, before time.Duration
	for _, w := range writers {
		gap = max(gap, w.longestGap(start.Add(-time.Second), end.Add(500*time.Millisecond)))
		before = max(before, w.longestGap(start.Add(-3*time.Second), start.Add(-time.Second)))
	}
	r.t.Logf("%s: %s in %v (writes held %v by the leader; longest time without an acknowledged write around it: %v, in the 2 s before: %v)",
		op, strings.TrimSpace(r.mirrorCmd(op).Stdout), end.Sub(start).Round(time.Millisecond), out.Pause.Duration.Round(time.Millisecond),
		gap.Round(time.Millisecond), before.Round(time.Millisecond))
	return &out, gap
}

// restoreEtcd stops the etcd members and restores each one's fresh data dir
// from a snapshot with etcdutl (same names, peer URLs and token), as undo
// does on every control-plane node; start starts them.
func (r *mirrorRig) restoreEtcd(snap string, round string) (start func()) {
	t := r.t
	t.Helper()
	for _, m := range r.Etcd {
		m.Kill9()
	}
	for _, m := range r.Etcd {
		dir := fmt.Sprintf("%s-restored-%s", m.DataDir, round)
		res := runCmd("", etcdutlBin(t), nil, "snapshot", "restore", snap, "--name", m.Name, "--data-dir", dir,
			"--initial-cluster", initialCluster(r.Etcd), "--initial-cluster-token", r.token+"-etcd", "--initial-advertise-peer-urls", m.peerURL)
		if res.Err != nil {
			t.Fatalf("etcdutl snapshot restore into %s:\n%s", dir, res)
		}
		m.DataDir = dir
	}
	return func() {
		for _, m := range r.Etcd {
			m.startProc()
		}
		for _, m := range r.Etcd {
			m.waitReady()
		}
	}
}

// TestMirrorCutoverAndBack cuts a mirroring 3-member store over to owner
// under writes through every member, then goes back: a snapshot of the
// store restored into the 3 etcd members with etcdutl, the store replaying
// its changes onto them under writes, a cut-back, and the store mirroring
// etcd again — every acknowledged write kept with its revision, revisions
// never backwards (writers and a watch), every key's create/mod revision,
// version and lease identical on both sides, the pauses measured.
func TestMirrorCutoverAndBack(t *testing.T) {
	r := mirroredRig(t, 500)
	sc := r.storeClient()
	defer sc.Close()
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	watch := watchRevs(wctx, sc, "/w/", r.status(0).Since+1)
	var all []*ackWriter
	for cycle := 1; cycle <= mirrorCycles(); cycle++ {
		all = append(all, r.cycle(t, cycle)...)
	}
	level := r.waitLevel(time.Minute)
	n := r.compareAll(level)
	ec := r.etcdClient()
	defer ec.Close()
	kvs, _ := getAll(t, ec, level)
	acked := checkAcked(t, "etcd", kvs, all...)
	watch.check(t, level, all...)
	t.Logf("after %d cycles: %d keys identical on etcd and the store at revision %d; %d acknowledged writes kept", mirrorCycles(), n, level, acked)
}

// cycle is one cut-over and cut-back under writes.
func (r *mirrorRig) cycle(t *testing.T, cycle int) []*ackWriter {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	round := fmt.Sprintf("c%d", cycle)
	// 20 ms between writes: the replay into etcd is one transaction per
	// revision, in order (ADR 202 has its rate); three writers stay below it.
	writers := r.storeWriters(ctx, &wg, round+"a", 20*time.Millisecond)
	time.Sleep(4 * time.Second)
	over, _ := r.transition("cutover", writers)
	ec := r.etcdClient()
	defer ec.Close()
	time.Sleep(time.Second)
	if rev := etcdRevOf(t, ec); rev != over.Pause.Revision {
		t.Errorf("etcd at revision %d after the cut-over at %d: a write reached it after the switch", rev, over.Pause.Revision)
	}
	if res := r.mirrorCmd("cutover"); res.Err != nil || !strings.Contains(res.Stdout, "done before") {
		t.Errorf("cutover again: %s", res)
	}
	// Back: etcd stopped, the store snapshot taken, replay-to recorded
	// before etcd is restored and started (the replay then reaches it at
	// once and keeps its leases alive).
	start := r.restoreEtcdFromStore(round)
	start()
	// The leader dies (SIGKILL) while it replays onto etcd: the new leader
	// resumes from etcd's revision; the dead one comes back as it was.
	time.Sleep(time.Second)
	old := r.storeLeader()
	r.Store[old].Kill9()
	li := r.storeLeader()
	r.Store[old].startProc()
	waitServes(t, r.Store[old])
	if st := r.status(old); st.Mode != api.ReplayingTo {
		t.Errorf("%s restarted in mode %s, want %s", r.Store[old].Name, st.Mode, api.ReplayingTo)
	}
	t.Logf("replaying leader %s killed and restarted; %s leads the replay now", r.Store[old].Name, r.Store[li].Name)
	// Writes proposed to the dead leader time out after raft's request
	// timeout (7 s); past it the writers are back to normal.
	time.Sleep(5 * time.Second)
	st0 := r.status(li)
	time.Sleep(3 * time.Second)
	st := r.status(li)
	t.Logf("replaying to etcd: %d revisions behind (target at %d, store at %d); %.0f revisions/s replayed over 3 s",
		st.Lag, st.PeerRevision, st.AppliedRevision, float64(st.PeerRevision-st0.PeerRevision)/3)
	back, _ := r.transition("cutback", writers)
	time.Sleep(2 * time.Second)
	cancel()
	wg.Wait()
	for _, w := range writers {
		w.report(t)
	}
	level := r.waitLevel(time.Minute)
	r.compareAll(level)
	r.compareAll(back.Pause.Revision)
	return writers
}

// restoreEtcdFromStore is undo's order: etcd's members stopped, a store
// snapshot, replay-to at its revision, the members restored from it.
func (r *mirrorRig) restoreEtcdFromStore(round string) (start func()) {
	t := r.t
	for _, m := range r.Etcd {
		m.Kill9()
	}
	snap := snapshotSave(t, r.Store[0])
	rev := snapshotStatus(t, snap).Revision
	args := append([]string{"--revision", fmt.Sprint(rev), "--json"}, peerArgs("target", r.etcdPeer())...)
	if res := r.mirrorCmd("replay-to", args...); res.Err != nil {
		t.Fatalf("mirror replay-to:\n%s", res)
	}
	if res := r.mirrorCmd("replay-to", args...); res.Err != nil {
		t.Fatalf("mirror replay-to again (idempotent):\n%s", res)
	}
	t.Logf("store snapshot at revision %d; replay-to recorded", rev)
	return r.restoreEtcd(snap, round)
}

func etcdRevOf(t *testing.T, c *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("revision: %v", err)
	}
	return resp.Header.Revision
}
