package storee2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

// refusedWith fails unless res failed with one line containing want.
func refusedWith(t *testing.T, what string, res cmdResult, want string) {
	t.Helper()
	msg := strings.TrimSpace(res.Stderr)
	if res.Err == nil || !strings.Contains(msg, want) || strings.Count(msg, "\n") > 0 {
		t.Errorf("%s: want one line with %q, got:\n%s", what, want, res)
		return
	}
	t.Logf("%s: %s", what, msg)
}

// TestMirrorStartRefused: a store that does not hold the source's state at
// its revision, one at another revision than the snapshot's, a source
// compacted past it, and bad flags are refused with one line each, and the
// data dir is left as it was.
func TestMirrorStartRefused(t *testing.T) {
	r := newMirrorRig(t)
	r.startEtcd(3)
	ec := r.etcdClient()
	defer ec.Close()
	seedEtcd(t, ec, 50)
	snap := snapshotSave(t, r.Etcd[0])
	rev := snapshotStatus(t, snap).Revision
	for i := 0; i < 10; i++ {
		if _, err := ec.Put(context.Background(), fmt.Sprintf("/later/%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	restore := func(name string) string {
		dir := filepath.Join(r.dir, name)
		if res := r.qk("store", "restore", snap, "--data-dir", dir); res.Err != nil {
			t.Fatalf("restore: %s", res)
		}
		return dir
	}
	start := func(dir string, extra ...string) cmdResult {
		return r.qk(append(append([]string{"store", "mirror", "start", "--data-dir", dir}, peerArgs("source", r.etcdPeer())...), extra...)...)
	}
	dir := restore("wrong-revision")
	refusedWith(t, "another revision than the snapshot's", start(dir, "--revision", fmt.Sprint(rev+3)), fmt.Sprintf("at revision %d, not %d", rev, rev+3))

	// A store written after the restore holds another state at its
	// revision than the source.
	dir = restore("diverged")
	s := r.newServer("store", "qk-single")
	s.DataDir = dir
	s.clusterArgs = []string{}
	s.Start()
	c := s.Client()
	if _, err := c.Put(context.Background(), "/diverged", "x"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	s.Kill9()
	refusedWith(t, "a store with another state", start(dir), "does not hold the source's state at revision")

	dir = restore("compacted")
	if _, err := ec.Compact(context.Background(), rev+5); err != nil {
		t.Fatal(err)
	}
	refusedWith(t, "a compacted source", start(dir), "compacted its history past revision")

	refusedWith(t, "no source", r.qk("store", "mirror", "start", "--data-dir", dir), "--source-endpoints is empty")
	bad := r.etcdPeer()
	bad.CAFile = filepath.Join(r.dir, "no-such-ca.crt")
	refusedWith(t, "an unreadable CA", r.qk(append([]string{"store", "mirror", "start", "--data-dir", dir}, peerArgs("source", bad)...)...), "--source-cacert")
	refusedWith(t, "no data dir", start(filepath.Join(r.dir, "absent")), "does not exist")
	if _, err := os.Stat(filepath.Join(dir, "raft")); err == nil {
		t.Errorf("a refused start left %s/raft", dir)
	}
}

// TestMirrorSourceCompacted: a mirror whose source compacted past what it
// applied (every member was down meanwhile) stops for good with a clear
// error: status says so, writes and linearizable reads are refused, a
// cut-over is refused; serializable reads still answer.
func TestMirrorSourceCompacted(t *testing.T) {
	r := mirroredRig(t, 50)
	for _, m := range r.Store {
		m.Kill9()
	}
	ec := r.etcdClient()
	defer ec.Close()
	var last int64
	for i := 0; i < 20; i++ {
		resp, err := ec.Put(context.Background(), fmt.Sprintf("/while-down/%d", i), "x")
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	if _, err := ec.Compact(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	for _, m := range r.Store {
		m.startProc()
	}
	for _, m := range r.Store {
		waitServes(t, m)
	}
	var st *api.Status
	if !eventually(context.Background(), 60*time.Second, 200*time.Millisecond, func() bool { st = r.status(0); return st.Failed != "" }) {
		t.Fatalf("the mirror did not stop after its source compacted past it: %+v", st)
	}
	if !strings.Contains(st.Failed, "compacted its history past revision") {
		t.Errorf("failed: %q, want the compacted source named", st.Failed)
	}
	t.Logf("status: failed: %s", st.Failed)
	sc := r.Store[1].Client()
	defer sc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := sc.Put(ctx, "/after", "x"); err == nil || !strings.Contains(err.Error(), "mirror stopped") {
		t.Errorf("a write on a failed mirror: %v, want it refused", err)
	}
	if _, err := sc.Get(ctx, "/seed/00001"); err == nil {
		t.Errorf("a linearizable read on a failed mirror answered")
	}
	if _, err := sc.Get(ctx, "/seed/00001", clientv3.WithSerializable()); err != nil {
		t.Errorf("a serializable read on a failed mirror: %v", err)
	}
	refusedWith(t, "cutover of a failed mirror", r.mirrorCmd("cutover"), "the replay failed")
}

// TestMirrorReplayToDiverged: while the store replays onto etcd, a write
// made on etcd directly stops the replay with a divergence (status), the
// store goes on serving as owner, and replay-to --stop ends the mode.
func TestMirrorReplayToDiverged(t *testing.T) {
	r := mirroredRig(t, 50)
	if res := r.mirrorCmd("cutover"); res.Err != nil {
		t.Fatalf("cutover: %s", res)
	}
	start := r.restoreEtcdFromStore("d")
	start()
	sc := r.storeClient()
	defer sc.Close()
	ec := r.etcdClient()
	defer ec.Close()
	ctx := context.Background()
	if _, err := sc.Put(ctx, "/owner/1", "x"); err != nil {
		t.Fatal(err)
	}
	r.waitLevelOwner(t)
	if _, err := ec.Put(ctx, "/behind-the-back", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Put(ctx, "/owner/2", "y"); err != nil {
		t.Fatal(err)
	}
	var st *api.Status
	if !eventually(ctx, 60*time.Second, 200*time.Millisecond, func() bool { st = r.status(r.storeLeader()); return st.Failed != "" }) {
		t.Fatalf("the replay did not stop after etcd was written behind its back: %+v", st)
	}
	t.Logf("status: failed: %s", st.Failed)
	if !strings.Contains(st.Failed, "diverged") {
		t.Errorf("failed %q, want a divergence", st.Failed)
	}
	if _, err := sc.Put(ctx, "/owner/3", "z"); err != nil {
		t.Errorf("the owner stopped taking writes after its replay failed: %v", err)
	}
	refusedWith(t, "cutback after a failed replay", r.mirrorCmd("cutback"), "the replay failed")
	if res := r.mirrorCmd("replay-to", "--stop"); res.Err != nil || !strings.Contains(res.Stdout, "mode owner") {
		t.Errorf("replay-to --stop: %s", res)
	}
	if res := r.mirrorCmd("cutover"); res.Err != nil || !strings.Contains(res.Stdout, "done before") {
		t.Errorf("cutover again after replay-to --stop: %s", res)
	}
	refusedWith(t, "cutback of an owner", r.mirrorCmd("cutback"), "a cutback needs mode replaying-to")
	refusedWith(t, "replay-to without a revision", r.mirrorCmd("replay-to", peerArgs("target", r.etcdPeer())...), "--revision is missing")
	refusedWith(t, "a hold timeout too short", r.mirrorCmd("cutover", "--hold-timeout", "1ms"), "--hold-timeout must be between")
}

// waitLevelOwner waits until etcd (the target) is at the store's revision.
func (r *mirrorRig) waitLevelOwner(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := r.status(r.storeLeader())
		if st.PeerRevision != 0 && st.Lag == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replay into etcd did not level in 60 s: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
