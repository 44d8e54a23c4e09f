package replica

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/client/pkg/v3/types"
)

// Config is a member's clustering configuration; the names and meanings are
// etcd's flags.
type Config struct {
	// Name is --name; it keys this member in InitialCluster.
	Name string
	// DataDir is --data-dir; raft's WAL and snapshots go in DataDir/raft.
	DataDir string
	// InitialCluster is --initial-cluster (name=peerURL,...).
	InitialCluster string
	// InitialClusterState is "new" (bootstrap) or "existing" (join).
	InitialClusterState string
	// InitialClusterToken is --initial-cluster-token.
	InitialClusterToken string
	// AdvertisePeerURLs is --initial-advertise-peer-urls.
	AdvertisePeerURLs []string
	// ListenPeerURLs is --listen-peer-urls.
	ListenPeerURLs []string
	// ClientURLs are the advertised client URLs published to the cluster.
	ClientURLs []string
	// PeerTLS is --peer-cert-file, --peer-key-file, --peer-trusted-ca-file and
	// --peer-client-cert-auth.
	PeerTLS transport.TLSInfo
	// Heartbeat and ElectionTimeout are --heartbeat-interval and
	// --election-timeout (etcd: 100 ms and 1000 ms).
	Heartbeat, ElectionTimeout time.Duration
	// SnapshotCount is --snapshot-count: applied entries between raft
	// snapshots (the log is truncated behind them).
	SnapshotCount uint64
	// MaxRequestBytes bounds a proposal (the API checks requests first).
	MaxRequestBytes int
	// StrictReconfigCheck is --strict-reconfig-check (etcd's default: on):
	// refuse member changes that would lose quorum (reconfig.go).
	StrictReconfigCheck bool
}

func (c *Config) walDir() string  { return filepath.Join(c.DataDir, "raft", "wal") }
func (c *Config) snapDir() string { return filepath.Join(c.DataDir, "raft", "snap") }

// RaftDir is where a member keeps raft's WAL and snapshots inside its data dir.
func RaftDir(dataDir string) string { return filepath.Join(dataDir, "raft") }

func (c *Config) withDefaults() {
	if c.InitialClusterState == "" {
		c.InitialClusterState = "new"
	}
	if c.InitialClusterToken == "" {
		c.InitialClusterToken = "etcd-cluster"
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 100 * time.Millisecond
	}
	if c.ElectionTimeout <= 0 {
		c.ElectionTimeout = 1000 * time.Millisecond
	}
	if c.SnapshotCount == 0 {
		c.SnapshotCount = 10000
	}
	if len(c.AdvertisePeerURLs) == 0 {
		c.AdvertisePeerURLs = c.ListenPeerURLs
	}
}

// Validate checks the clustering flags and returns an error that names the
// flag and the fix.
func (c *Config) Validate() error {
	c.withDefaults()
	if c.InitialClusterState != "new" && c.InitialClusterState != "existing" {
		return fmt.Errorf("--initial-cluster-state %q: use new (bootstrap a cluster) or existing (join one)", c.InitialClusterState)
	}
	if len(c.ListenPeerURLs) == 0 {
		return errors.New("--listen-peer-urls is empty; a cluster member needs a URL its peers reach it on, such as https://10.0.0.1:2380")
	}
	for _, raw := range append(append([]string{}, c.ListenPeerURLs...), c.AdvertisePeerURLs...) {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return fmt.Errorf("peer URL %q is not an http(s) URL; use the form https://10.0.0.1:2380", raw)
		}
		if u.Scheme == "https" && (c.PeerTLS.CertFile == "" || c.PeerTLS.KeyFile == "") {
			return fmt.Errorf("peer URL %s is https: pass --peer-cert-file and --peer-key-file", raw)
		}
	}
	if c.PeerTLS.ClientCertAuth && c.PeerTLS.TrustedCAFile == "" {
		return errors.New("--peer-client-cert-auth needs --peer-trusted-ca-file, the CA that signs peer certificates")
	}
	if c.ElectionTimeout < 5*c.Heartbeat {
		return fmt.Errorf("--election-timeout %v must be at least 5 times --heartbeat-interval %v", c.ElectionTimeout, c.Heartbeat)
	}
	urls, err := c.initialCluster()
	if err != nil {
		return err
	}
	mine, ok := urls[c.Name]
	if !ok {
		return fmt.Errorf("--initial-cluster has no member named %q (--name); add %s=%s to it", c.Name, c.Name, c.AdvertisePeerURLs[0])
	}
	adv, err := types.NewURLs(c.AdvertisePeerURLs)
	if err != nil {
		return fmt.Errorf("--initial-advertise-peer-urls: %w", err)
	}
	if !sameURLs(mine, adv) {
		return fmt.Errorf("--initial-cluster gives %s the peer URLs %s but --initial-advertise-peer-urls is %s; make them equal", c.Name, mine, adv)
	}
	return nil
}

// initialCluster parses --initial-cluster (default: this member alone).
func (c *Config) initialCluster() (types.URLsMap, error) {
	s := c.InitialCluster
	if s == "" {
		s = c.Name + "=" + joinComma(c.AdvertisePeerURLs, c.Name)
	}
	m, err := types.NewURLsMap(s)
	if err != nil {
		return nil, fmt.Errorf("--initial-cluster %q: %w; use name=https://host:2380,...", s, err)
	}
	return m, nil
}

func joinComma(urls []string, name string) string {
	out := ""
	for i, u := range urls {
		if i > 0 {
			out += "," + name + "="
		}
		out += u
	}
	return out
}

func sameURLs(a, b types.URLs) bool {
	as, bs := a.StringSlice(), b.StringSlice()
	if len(as) != len(bs) {
		return false
	}
	set := map[string]bool{}
	for _, u := range as {
		set[u] = true
	}
	for _, u := range bs {
		if !set[u] {
			return false
		}
	}
	return true
}
