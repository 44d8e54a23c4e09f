package storee2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// cluster is a replicated store (or etcd cluster) of members on loopback,
// sharing one PKI: client TLS with client-cert auth as in startServer, peer
// TLS with --peer-client-cert-auth unless plainPeers (the partition proxy
// reads raft's HTTP headers). Members advertise proxyURLs when a proxy sits
// in front of their peer listener.
type cluster struct {
	t       testing.TB
	PKI     *pki
	Members []*server
	token   string
	dir     string
	plain   bool
}

type clusterOptions struct {
	serverOptions
	// PlainPeers serves peer traffic over http (for the partition proxy).
	PlainPeers bool
	// AdvertisePeer maps a member index to the peer URL it advertises (a
	// proxy in front of its listener); absent: its listen URL.
	AdvertisePeer map[int]string
	deferStart    bool
	// FirstName names member 1 (default m1).
	FirstName string
}

// newClusterMember prepares (does not start) member i of c.
func (c *cluster) newMember(i int, listenPeer, advertisePeer string, opts serverOptions) *server {
	t := c.t
	kind := serverKind(t)
	s := &server{
		t: t, Kind: kind, bin: serverBin(t, kind),
		Name:       fmt.Sprintf("m%d", i),
		DataDir:    filepath.Join(c.dir, fmt.Sprintf("m%d", i), "data"),
		ClientURL:  "https://" + freeAddr(t),
		MetricsURL: "http://" + freeAddr(t),
		PKI:        c.PKI,
		ServerPair: c.PKI.issue(t, fmt.Sprintf("server-m%d", i), loopbackServer("qk-store")),
		ClientPair: c.PKI.issue(t, fmt.Sprintf("client-m%d", i), certSpec{CN: "root", Client: true}),
		opts:       opts,
		logPath:    filepath.Join(c.dir, fmt.Sprintf("m%d.log", i)),
		peerURL:    listenPeer,
	}
	s.clusterArgs = []string{"--listen-peer-urls", listenPeer, "--initial-advertise-peer-urls", advertisePeer,
		"--initial-cluster-token", c.token}
	if !c.plain {
		s.clusterArgs = append(s.clusterArgs, "--peer-cert-file", s.ServerPair.Cert, "--peer-key-file", s.ServerPair.Key,
			"--peer-trusted-ca-file", c.PKI.CAFile, "--peer-client-cert-auth")
	}
	t.Cleanup(func() {
		s.Kill9()
		if t.Failed() {
			s.dumpLog()
		}
		keepLog(t, s.logPath)
	})
	return s
}

func (c *cluster) scheme() string {
	if c.plain {
		return "http://"
	}
	return "https://"
}

// startCluster starts n members bootstrapping a new cluster and waits until
// each serves a linearizable Range.
func startCluster(t testing.TB, n int, opts clusterOptions) *cluster {
	t.Helper()
	return startClusterWithListen(t, n, opts, nil)
}

// startClusterWithListen is startCluster with given peer listen URLs
// (member index -> URL), for proxies that must know them first.
func startClusterWithListen(t testing.TB, n int, opts clusterOptions, listenURLs map[int]string) *cluster {
	t.Helper()
	dir := t.TempDir()
	c := &cluster{t: t, PKI: newPKI(t, filepath.Join(dir, "pki"), "qk-cluster-ca"), token: "qk-" + fmt.Sprint(time.Now().UnixNano()), dir: dir, plain: opts.PlainPeers}
	var initial []string
	for i := 1; i <= n; i++ {
		listen := c.scheme() + freeAddr(t)
		if u, ok := listenURLs[i]; ok {
			listen = u
		}
		adv := listen
		if u, ok := opts.AdvertisePeer[i]; ok {
			adv = u
		}
		m := c.newMember(i, listen, adv, opts.serverOptions)
		if i == 1 && opts.FirstName != "" {
			m.Name = opts.FirstName
		}
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+adv)
	}
	for _, m := range c.Members {
		m.clusterArgs = append(m.clusterArgs, "--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new")
	}
	if !opts.deferStart {
		c.start()
	}
	return c
}

// startClusterDeferred prepares a cluster; the test calls start.
func startClusterDeferred(t testing.TB, n int, opts clusterOptions) *cluster {
	opts.deferStart = true
	return startCluster(t, n, opts)
}

// start starts every member and waits until each serves.
func (c *cluster) start() {
	for _, m := range c.Members {
		m.startProc()
	}
	for _, m := range c.Members {
		m.waitReady()
	}
}

// Client is a client of every member's endpoint (as kube-apiserver is
// configured with a cluster); the caller closes it.
func (c *cluster) Client() *clientv3.Client {
	c.t.Helper()
	var eps []string
	for _, m := range c.Members {
		if m.PID() != 0 {
			eps = append(eps, m.ClientURL)
		}
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: eps, TLS: c.Members[0].TLSConfig(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatalf("etcd client for %v: %v", eps, err)
	}
	return cl
}

// Endpoints are the members' client URLs.
func (c *cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// memberStatus asks one member for its status (short timeout).
func memberStatus(m *server) (*clientv3.StatusResponse, error) {
	cl := m.Client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return cl.Status(ctx, m.ClientURL)
}

// leader returns the index of the member the running members agree leads,
// waiting up to timeout.
func (c *cluster) leader(timeout time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if i := c.agreedLeader(); i >= 0 {
			return i
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no leader agreed on by the running members within %v", timeout)
	return -1
}

// agreedLeader returns the leader's index if every running member names it.
func (c *cluster) agreedLeader() int {
	var lead uint64
	for _, m := range c.Members {
		if m.PID() == 0 {
			continue
		}
		st, err := memberStatus(m)
		if err != nil || st.Leader == 0 || (lead != 0 && st.Leader != lead) {
			return -1
		}
		lead = st.Leader
	}
	for i, m := range c.Members {
		if m.PID() == 0 {
			continue
		}
		if st, err := memberStatus(m); err == nil && st.Header.MemberId == lead {
			return i
		}
	}
	return -1
}

// waitCaughtUp waits until every running member has applied what the
// leader had committed when the call began, and returns that index.
func (c *cluster) waitCaughtUp(timeout time.Duration) {
	c.t.Helper()
	st, err := memberStatus(c.Members[c.leader(timeout)])
	if err != nil {
		c.t.Fatalf("leader status: %v", err)
	}
	deadline := time.Now().Add(timeout)
	for _, m := range c.Members {
		for m.PID() != 0 {
			ms, err := memberStatus(m)
			if err == nil && ms.RaftAppliedIndex >= st.RaftIndex {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("member %s did not apply index %d within %v (status %v, %v)", m.Name, st.RaftIndex, timeout, ms, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// checkSameState checks that every running member holds the same key-values
// at the same revision (HashKV), as etcd's consistency checker does.
func (c *cluster) checkSameState(rev int64) {
	c.t.Helper()
	var first uint32
	seen := false
	for _, m := range c.Members {
		if m.PID() == 0 {
			continue
		}
		cl := m.Client()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		h, err := cl.HashKV(ctx, m.ClientURL, rev)
		cancel()
		cl.Close()
		if err != nil {
			c.t.Fatalf("HashKV at %d on %s: %v", rev, m.Name, err)
		}
		if !seen {
			first, seen = h.Hash, true
		} else if h.Hash != first {
			c.t.Fatalf("HashKV at revision %d differs: %s has %x, another member %x", rev, m.Name, h.Hash, first)
		}
	}
}

// clusterMembers is QK_STORE_MEMBERS: with 3, every test that starts "a
// server" gets member 1 of a 3-member cluster (the others run beside it and
// are killed at cleanup), so the single-server tests also run in cluster
// mode: Kill9 and Start then kill and restart one member under load.
func clusterMembers() int {
	n, _ := strconv.Atoi(os.Getenv("QK_STORE_MEMBERS"))
	return n
}

func startClusterServer(t testing.TB, n int, opts serverOptions) *server {
	t.Helper()
	c := startCluster(t, n, clusterOptions{serverOptions: opts, FirstName: "qk-test"}) // tests compare the name
	s := c.Members[0]
	s.cluster = c
	return s
}
