// Package store runs `quantykube store`: the mvcc engine behind the etcd v3
// gRPC API (package etcdapi), with TLS, client-certificate auth, and an HTTP
// endpoint for /metrics, /health and /readyz.
package store

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/quantyroot/quantykube/internal/store/replica"
)

// Config is the store's configuration. Field names follow etcd's flags.
type Config struct {
	Name                string
	DataDir             string
	ListenClientURLs    []string
	AdvertiseClientURLs []string
	ListenMetricsURLs   []string
	CertFile            string
	KeyFile             string
	TrustedCAFile       string
	ClientCertAuth      bool
	WatchProgressNotify time.Duration
	UnsafeNoFsync       bool
	MaxRequestBytes     int
	MaxTxnOps           int
	QuotaBackendBytes   int64
	CacheBytes          int64
	MemTableBytes       int64
	// L0CompactionThreshold is when pebble compacts L0, in sublevels
	// (--l0-compaction-threshold; 0: mvcc.DefaultL0CompactionThreshold).
	L0CompactionThreshold int
	// MemoryLimitBytes is Go's soft memory limit (0: GOMEMLIMIT or none).
	MemoryLimitBytes int64
	// GCExcludeEngineMemory paces Go's GC on the heap without pebble's
	// memtables and cached blocks, which are Go heap in a build without cgo
	// (--gc-exclude-engine-memory; on by default, ADR 013).
	GCExcludeEngineMemory bool
	// GCBusyWindow: while the store allocates fast, the paced GC's headroom
	// is at least what it allocated in this window (--gc-busy-window; 0:
	// the 16 MiB floor alone; gcpace/busy.go).
	GCBusyWindow time.Duration
	// RangeReadAhead reads the next page of a paginated range ahead of its
	// request while writes are quiet (--range-read-ahead; on by default
	// since writes gate it, ADR 012).
	RangeReadAhead bool
	// EnablePprof serves /debug/pprof on the metrics listeners (etcd's --enable-pprof).
	EnablePprof bool
	// Cluster holds etcd's clustering flags; with --listen-peer-urls (or
	// --initial-cluster) set, the store runs as a raft member.
	Cluster replica.Config
}

// Clustered reports whether the store runs as a member of a replicated
// cluster rather than as a single store.
func (c *Config) Clustered() bool {
	return len(c.Cluster.ListenPeerURLs) > 0 || c.Cluster.InitialCluster != ""
}

// DefaultClientURL is where the store listens unless told otherwise: beside
// etcd's 2379 so both can run on one control-plane node during a move.
const DefaultClientURL = "https://127.0.0.1:2479"

// Validate checks the configuration without touching anything, and returns
// an error that names the problem and the fix.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("--data-dir is empty; pass the directory the store keeps its data in")
	}
	if len(c.ListenClientURLs) == 0 {
		return errors.New("--listen-client-urls is empty; pass at least one URL such as " + DefaultClientURL)
	}
	needTLS := false
	for _, raw := range append(append([]string{}, c.ListenClientURLs...), c.ListenMetricsURLs...) {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" && u.Scheme != "unix" {
			return fmt.Errorf("listen URL %q is not a URL; use the form https://127.0.0.1:2479", raw)
		}
		switch u.Scheme {
		case "https", "unixs":
			needTLS = true
		case "http", "unix":
		default:
			return fmt.Errorf("listen URL %q has scheme %q; use http or https", raw, u.Scheme)
		}
	}
	if needTLS && (c.CertFile == "" || c.KeyFile == "") {
		return errors.New("an https listen URL needs --cert-file and --key-file (or listen on http://)")
	}
	if c.ClientCertAuth && c.TrustedCAFile == "" {
		return errors.New("--client-cert-auth needs --trusted-ca-file, the CA that signs client certificates")
	}
	for flag, f := range map[string]string{"--cert-file": c.CertFile, "--key-file": c.KeyFile, "--trusted-ca-file": c.TrustedCAFile} {
		if f == "" {
			continue
		}
		if _, err := os.ReadFile(f); err != nil {
			return fmt.Errorf("%s %s cannot be read (%v); pass a readable PEM file", flag, f, unwrapPathErr(err))
		}
	}
	if c.MaxRequestBytes < 0 || c.MaxTxnOps < 0 {
		return errors.New("--max-request-bytes and --max-txn-ops must not be negative")
	}
	if err := c.validateEngine(); err != nil {
		return err
	}
	if !c.Clustered() {
		if _, err := os.Stat(replica.RaftDir(c.DataDir)); err == nil {
			return fmt.Errorf("data dir %s belongs to a cluster member (it has %s); pass its clustering flags (--name, --listen-peer-urls, --initial-advertise-peer-urls, --initial-cluster)", c.DataDir, replica.RaftDir(c.DataDir))
		}
		return nil
	}
	c.Cluster.Name, c.Cluster.DataDir, c.Cluster.MaxRequestBytes = c.Name, c.DataDir, c.MaxRequestBytes
	return c.Cluster.Validate()
}

func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// splitURLs splits a comma-separated flag value.
func SplitURLs(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
