package replica

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

type testMember struct {
	cfg   Config
	store *mvcc.Store
	rep   *Replica
}

// freePeerURL returns a peer URL on a port not handed out before in this
// process (two members given one port would each fail to bind it).
func freePeerURL(t *testing.T) string {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if !handedOut[addr] {
			handedOut[addr] = true
			return "http://" + addr
		}
	}
}

var handedOut = map[string]bool{}

func (m *testMember) start(t *testing.T) {
	t.Helper()
	st, err := mvcc.Open(m.cfg.DataDir, mvcc.Options{Replicated: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Start(m.cfg, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		st.Close()
		t.Fatalf("start %s: %v", m.cfg.Name, err)
	}
	st.SetProposer(rep)
	m.store, m.rep = st, rep
}

func (m *testMember) stop() {
	if m.rep != nil {
		m.rep.Stop()
		m.store.Close()
		m.rep = nil
	}
}

// newTestCluster starts n members bootstrapping a new cluster; they stop at
// the end of the test.
func newTestCluster(t *testing.T, n int) []*testMember {
	dir := t.TempDir()
	var ms []*testMember
	initial := ""
	for i := 1; i <= n; i++ {
		u := freePeerURL(t)
		if i > 1 {
			initial += ","
		}
		initial += fmt.Sprintf("m%d=%s", i, u)
		ms = append(ms, &testMember{cfg: Config{Name: fmt.Sprintf("m%d", i), DataDir: filepath.Join(dir, fmt.Sprint(i)), ListenPeerURLs: []string{u}}})
	}
	for _, m := range ms {
		m.cfg.InitialCluster = initial
		m.start(t)
	}
	t.Cleanup(func() {
		for _, m := range ms {
			m.stop()
		}
	})
	return ms
}

// TestThreeMembers runs three members in one process: a write proposed on a
// follower is applied everywhere at the same revision, a linearizable read
// after it sees it, and after the leader stops the other two elect a leader,
// take writes, and the old leader catches up when it restarts.
func TestThreeMembers(t *testing.T) {
	ms := newTestCluster(t, 3)
	lead := waitLeader(t, ms)
	follower := ms[(lead+1)%3]
	ctx := context.Background()
	resp, err := follower.store.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v1")})
	if err != nil {
		t.Fatalf("put on a follower: %v", err)
	}
	for _, m := range ms {
		if err := m.rep.ReadBarrier(ctx); err != nil {
			t.Fatalf("read barrier on %s: %v", m.cfg.Name, err)
		}
		if m.store.Rev() != resp.Header.Revision {
			t.Fatalf("%s at revision %d after a linearizable barrier, the put was at %d", m.cfg.Name, m.store.Rev(), resp.Header.Revision)
		}
	}
	ms[lead].stop()
	rest := []*testMember{ms[(lead+1)%3], ms[(lead+2)%3]}
	waitLeader(t, rest)
	resp2, err := rest[0].store.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v2")})
	if err != nil {
		t.Fatalf("put after the leader stopped: %v", err)
	}
	ms[lead].start(t)
	deadline := time.Now().Add(20 * time.Second)
	for ms[lead].store.Rev() < resp2.Header.Revision {
		if time.Now().After(deadline) {
			t.Fatalf("restarted member at revision %d, want %d", ms[lead].store.Rev(), resp2.Header.Revision)
		}
		time.Sleep(20 * time.Millisecond)
	}
	got, err := ms[lead].store.Range(ctx, &pb.RangeRequest{Key: []byte("k")})
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v2" {
		t.Fatalf("restarted member reads %v, %v", got, err)
	}
}

// waitLeader returns the index of the member all of ms name as leader.
func waitLeader(t *testing.T, ms []*testMember) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		lead := ms[0].rep.Leader()
		agreed := lead != 0
		for _, m := range ms {
			agreed = agreed && m.rep.Leader() == lead
		}
		if agreed {
			for i, m := range ms {
				if m.rep.ID() == lead {
					return i
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no agreed leader within 20 s")
	return -1
}
