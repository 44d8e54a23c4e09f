package storee2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/mirror/client"
)

// mirrorRig is a 3-member etcd cluster and a store cluster made from it, as
// on a kubeadm control plane: one CA for everything, the store members
// reaching etcd with a client certificate etcd trusts (the files at the
// same paths for every member, as on every control-plane node).
type mirrorRig struct {
	t     *testing.T
	dir   string
	PKI   *pki
	token string
	Etcd  []*server
	Store []*server
	// toEtcd is the client certificate the store members use against etcd
	// (kubeadm's apiserver-etcd-client).
	toEtcd keyPair
	// used are the ports handed out (freeAddr may hand out one twice).
	used map[string]bool
}

// addr is a free loopback address no member of the rig has yet.
func (r *mirrorRig) addr() string {
	for {
		a := freeAddr(r.t)
		if !r.used[a] {
			r.used[a] = true
			return a
		}
	}
}

func newMirrorRig(t *testing.T) *mirrorRig {
	t.Helper()
	if serverKind(t) == "etcd" || clusterMembers() > 1 {
		t.Skip("the mirror tests run etcd and the store side by side, with clusters of their own: they run once, with QK_STORE_CMD=store and without QK_STORE_MEMBERS")
	}
	binary(t, envStoreBin, "", "build it with `go build -o /tmp/quantykube ./cmd/quantykube` and set QK_STORE_BIN")
	binary(t, envEtcd, "", "set it to the output of `scripts/deps.sh path etcd`")
	etcdctlBin(t)
	dir := t.TempDir()
	r := &mirrorRig{t: t, dir: dir, PKI: newPKI(t, filepath.Join(dir, "pki"), "qk-mirror-ca"), token: fmt.Sprint("qk-mirror-", time.Now().UnixNano()), used: map[string]bool{}}
	r.toEtcd = r.PKI.issue(t, "store-etcd-client", certSpec{CN: "quantykube-store", Client: true})
	return r
}

// newServer prepares (does not start) a member of kind with its own ports,
// data dir and certificates from the rig's CA.
func (r *mirrorRig) newServer(kind, name string) *server {
	t := r.t
	s := &server{
		t: t, Kind: kind, bin: serverBin(t, kind), Name: name,
		DataDir:    filepath.Join(r.dir, name, "data"),
		ClientURL:  "https://" + r.addr(),
		MetricsURL: "http://" + r.addr(),
		PKI:        r.PKI,
		ServerPair: r.PKI.issue(t, "server-"+name, loopbackServer("qk-"+kind)),
		ClientPair: r.PKI.issue(t, "client-"+name, certSpec{CN: "root", Client: true}),
		logPath:    filepath.Join(r.dir, name+".log"),
		peerURL:    "https://" + r.addr(),
	}
	s.clusterArgs = []string{"--listen-peer-urls", s.peerURL, "--initial-advertise-peer-urls", s.peerURL,
		"--initial-cluster-token", r.token + "-" + kind, "--peer-cert-file", s.ServerPair.Cert, "--peer-key-file", s.ServerPair.Key,
		"--peer-trusted-ca-file", r.PKI.CAFile, "--peer-client-cert-auth"}
	t.Cleanup(func() {
		s.Kill9()
		if t.Failed() {
			s.dumpLog()
		}
		keepLog(t, s.logPath)
	})
	return s
}

func initialCluster(ms []*server) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, m.Name+"="+m.peerURL)
	}
	return strings.Join(parts, ",")
}

// startEtcd starts an n-member etcd cluster and waits until each serves.
func (r *mirrorRig) startEtcd(n int) {
	r.t.Helper()
	for i := 1; i <= n; i++ {
		r.Etcd = append(r.Etcd, r.newServer("etcd", fmt.Sprintf("etcd%d", i)))
	}
	for _, m := range r.Etcd {
		m.clusterArgs = append(m.clusterArgs, "--initial-cluster", initialCluster(r.Etcd), "--initial-cluster-state", "new")
		m.startProc()
	}
	for _, m := range r.Etcd {
		m.waitReady()
	}
}

// etcdPeer is the etcd cluster as the store members reach it.
func (r *mirrorRig) etcdPeer() api.Peer {
	p := api.Peer{CAFile: r.PKI.CAFile, CertFile: r.toEtcd.Cert, KeyFile: r.toEtcd.Key}
	for _, m := range r.Etcd {
		p.Endpoints = append(p.Endpoints, m.ClientURL)
	}
	return p
}

// peerArgs are the CLI flags naming p as role (source or target).
func peerArgs(role string, p api.Peer) []string {
	return []string{"--" + role + "-endpoints", strings.Join(p.Endpoints, ","), "--" + role + "-cacert", p.CAFile,
		"--" + role + "-cert", p.CertFile, "--" + role + "-key", p.KeyFile}
}

// qk runs the quantykube binary.
func (r *mirrorRig) qk(args ...string) cmdResult {
	return runCmd("", serverBin(r.t, "store"), nil, args...)
}

// mirrorCmd runs `quantykube store mirror SUB` against every store member.
func (r *mirrorRig) mirrorCmd(sub string, args ...string) cmdResult {
	var eps []string
	for _, m := range r.Store {
		eps = append(eps, m.ClientURL)
	}
	c := r.Store[0]
	base := []string{"store", "mirror", sub, "--endpoints", strings.Join(eps, ","), "--cacert", r.PKI.CAFile,
		"--cert", c.ClientPair.Cert, "--key", c.ClientPair.Key}
	return r.qk(append(base, args...)...)
}

// storeFromSnapshot makes the store cluster from an etcd snapshot as the
// host steps do: restore into the first member's data dir, record the
// mirror mode there before it first runs, start it as a one-member
// cluster, then add the others (they catch up by state snapshot).
func (r *mirrorRig) storeFromSnapshot(snap string, rev int64, members int) {
	t := r.t
	t.Helper()
	m1 := r.newServer("store", "qk1")
	if res := r.qk("store", "restore", snap, "--data-dir", m1.DataDir); res.Err != nil {
		t.Fatalf("store restore:\n%s", res)
	}
	args := append([]string{"store", "mirror", "start", "--data-dir", m1.DataDir, "--revision", fmt.Sprint(rev)}, peerArgs("source", r.etcdPeer())...)
	if res := r.qk(args...); res.Err != nil {
		t.Fatalf("store mirror start --data-dir:\n%s", res)
	} else {
		t.Logf("offline start: %s", strings.TrimSpace(res.Stdout))
	}
	m1.clusterArgs = append(m1.clusterArgs, "--initial-cluster", initialCluster([]*server{m1}), "--initial-cluster-state", "new")
	r.Store = append(r.Store, m1)
	m1.Start()
	for i := 2; i <= members; i++ {
		r.addStoreMember(fmt.Sprintf("qk%d", i))
	}
}

// addStoreMember adds a store member (member add, then start it joining).
func (r *mirrorRig) addStoreMember(name string) *server {
	t := r.t
	t.Helper()
	m := r.newServer("store", name)
	cl := r.storeClient()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		_, err := cl.MemberAdd(ctx, []string{m.peerURL})
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "unhealthy cluster") || ctx.Err() != nil {
			t.Fatalf("member add %s: %v", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	m.clusterArgs = append(m.clusterArgs, "--initial-cluster", initialCluster(append(append([]*server{}, r.Store...), m)), "--initial-cluster-state", "existing")
	r.Store = append(r.Store, m)
	m.startProc()
	waitServes(t, m)
	return m
}

func clientOf(t testing.TB, ms []*server) *clientv3.Client {
	t.Helper()
	var eps []string
	for _, m := range ms {
		eps = append(eps, m.ClientURL)
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: eps, TLS: ms[0].TLSConfig(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("client of %v: %v", eps, err)
	}
	return cl
}

func (r *mirrorRig) storeClient() *clientv3.Client { return clientOf(r.t, r.Store) }
func (r *mirrorRig) etcdClient() *clientv3.Client  { return clientOf(r.t, r.Etcd) }

// admin is the mirror admin client of store member i (the Go API the host
// steps use).
func (r *mirrorRig) admin(i int) *client.Client {
	r.t.Helper()
	m := r.Store[i]
	c, err := client.Dial(m.ClientURL, client.Files{CAFile: r.PKI.CAFile, CertFile: m.ClientPair.Cert, KeyFile: m.ClientPair.Key})
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// status asks store member i for its mirror status.
func (r *mirrorRig) status(i int) *api.Status {
	r.t.Helper()
	c := r.admin(i)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		r.t.Fatalf("mirror status of %s: %v", r.Store[i].Name, err)
	}
	return st
}

// storeLeader returns the index of the store member that leads.
func (r *mirrorRig) storeLeader() int {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for i, m := range r.Store {
			if m.PID() == 0 {
				continue
			}
			if st, err := memberStatus(m); err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return i
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.t.Fatal("no store leader within 30 s")
	return -1
}

// waitLevel waits until every running store member has applied the
// etcd cluster's current revision, and returns it.
func (r *mirrorRig) waitLevel(timeout time.Duration) int64 {
	r.t.Helper()
	ec := r.etcdClient()
	defer ec.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := ec.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		r.t.Fatalf("etcd revision: %v", err)
	}
	want := resp.Header.Revision
	r.waitStoreAt(ctx, want)
	return want
}

// waitStoreAt waits until every running store member is at rev or beyond.
func (r *mirrorRig) waitStoreAt(ctx context.Context, want int64) {
	r.t.Helper()
	for _, m := range r.Store {
		if m.PID() == 0 {
			continue
		}
		for {
			st, err := memberStatus(m)
			if err == nil && st.Header.Revision >= want {
				break
			}
			if ctx.Err() != nil {
				r.t.Fatalf("store member %s did not reach revision %d (status %v, %v); mirror status %+v", m.Name, want, st, err, r.status(0))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// compareAll checks that every running store member and etcd hold the same
// key-values (create and mod revision, version, lease, value) at rev.
func (r *mirrorRig) compareAll(rev int64) int {
	r.t.Helper()
	ec := r.etcdClient()
	defer ec.Close()
	n := 0
	for _, m := range r.Store {
		if m.PID() == 0 {
			continue
		}
		c := m.Client()
		n = compareAt(r.t, c, ec, rev)
		c.Close()
	}
	return n
}
