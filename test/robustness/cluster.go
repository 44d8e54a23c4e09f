package robustness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Server kinds the test runs against.
const (
	serverEtcd  = "etcd"
	serverStore = "store" // quantykube store
)

// clusterConfig says what to start.
type clusterConfig struct {
	server    string   // serverEtcd or serverStore
	bin       string   // etcd, or the quantykube binary
	members   int      // 3
	dir       string   // data dirs and logs go below it
	extraArgs []string // appended to every member's flags
}

// cluster is the running members.
type cluster struct {
	members []*member
}

// commonFlags are the flags every member gets, on etcd as on the store:
// etcd's clustering flags and meanings (issue #13), plaintext on loopback.
func commonFlags(m *member, initialCluster string) []string {
	return []string{
		"--name", m.name,
		"--data-dir", m.dataDir,
		"--listen-client-urls", m.clientURL,
		"--advertise-client-urls", m.clientURL,
		"--listen-peer-urls", m.peerURL,
		"--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", initialCluster,
		"--initial-cluster-state", "new",
		// As in etcd's robustness scenarios, so the bookmarkable guarantee is exercised.
		"--watch-progress-notify-interval", "100ms",
		"--log-level", "warn",
	}
}

// startCluster starts cfg.members members on free loopback ports and waits
// until a linearizable read through all endpoints succeeds.
func startCluster(ctx context.Context, cfg clusterConfig) (*cluster, error) {
	c := &cluster{}
	var initial []string
	ports, err := freePorts(2 * cfg.members) // all at once: distinct
	if err != nil {
		return nil, err
	}
	for i := range cfg.members {
		m := &member{
			name:      fmt.Sprintf("m%d", i),
			dataDir:   filepath.Join(cfg.dir, fmt.Sprintf("m%d.data", i)),
			clientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			peerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			logPath:   filepath.Join(cfg.dir, fmt.Sprintf("m%d.log", i)),
			bin:       cfg.bin,
		}
		initial = append(initial, m.name+"="+m.peerURL)
		c.members = append(c.members, m)
	}
	for _, m := range c.members {
		if err := os.MkdirAll(m.dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("create data dir of %s: %w", m.name, err)
		}
		if cfg.server == serverStore {
			m.args = append(m.args, "store")
		}
		m.args = append(m.args, commonFlags(m, strings.Join(initial, ","))...)
		m.args = append(m.args, cfg.extraArgs...)
		if err := m.start(); err != nil {
			c.kill()
			return nil, err
		}
	}
	if err := c.waitReady(ctx, time.Minute); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

// waitReady waits until every member answers Status() and a linearizable
// Get through all endpoints succeeds (the cluster has a leader and quorum).
func (c *cluster) waitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for _, m := range c.members {
		if err := m.waitServing(ctx); err != nil {
			return err
		}
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("dial %v: %w", c.endpoints(), err)
	}
	defer cl.Close()
	for {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		_, err := cl.Get(rctx, "key")
		rcancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no linearizable read through %v within %s: %w", c.endpoints(), limit, err)
		}
	}
}

// endpoints are the members' client URLs.
func (c *cluster) endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientURL)
	}
	return eps
}

// dataDirs are the members' data directories.
func (c *cluster) dataDirs() []string {
	var dirs []string
	for _, m := range c.members {
		dirs = append(dirs, walView(m.dataDir))
	}
	return dirs
}

// removeData deletes the members' data dirs and their WAL views (a run
// leaves about 200 MB a member).
func (c *cluster) removeData() {
	for _, m := range c.members {
		_ = os.RemoveAll(m.dataDir)
		_ = os.RemoveAll(m.dataDir + ".walview")
	}
}

// walView returns a directory whose member/wal is the member's raft WAL:
// etcd keeps it in <data-dir>/member/wal, quantykube store in
// <data-dir>/raft/wal (same format); etcd's reader wants the former.
func walView(dataDir string) string {
	if _, err := os.Stat(filepath.Join(dataDir, "member", "wal")); err == nil {
		return dataDir
	}
	view := dataDir + ".walview"
	if err := os.MkdirAll(view, 0o700); err != nil {
		return dataDir
	}
	_ = os.Symlink(filepath.Join(dataDir, "raft"), filepath.Join(view, "member"))
	return view
}

// leader returns the index of the member that says it leads, or -1.
func (c *cluster) leader(ctx context.Context) int {
	for i, m := range c.members {
		if !m.running() {
			continue
		}
		if st, err := m.status(ctx); err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
			return i
		}
	}
	return -1
}

// kill SIGKILLs every member.
func (c *cluster) kill() {
	for _, m := range c.members {
		m.kill()
	}
}
