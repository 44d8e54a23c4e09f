package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/quantyroot/quantykube/internal/store"
	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

func newStoreCommand() *cobra.Command {
	var (
		cfg                                  store.Config
		listen, advertise, metrics, logLevel string
		listenPeer, advertisePeer            string
		heartbeatMs, electionMs              uint
	)
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Serve the etcd v3 API that kube-apiserver runs on (revisions kept, fsync before ack)",
		Long: `quantykube store is an etcd-v3 API server built for kube-apiserver: one member,
pebble underneath, every write fsynced before it is acknowledged. Flags are named as etcd's.
With --listen-peer-urls and --initial-cluster it runs as a member of a cluster replicated
with etcd's raft (WAL, snapshots and peer transport are etcd's).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			cfg.ListenClientURLs = store.SplitURLs(listen)
			cfg.AdvertiseClientURLs = store.SplitURLs(advertise)
			cfg.ListenMetricsURLs = store.SplitURLs(metrics)
			cfg.Cluster.ListenPeerURLs = store.SplitURLs(listenPeer)
			cfg.Cluster.AdvertisePeerURLs = store.SplitURLs(advertisePeer)
			cfg.Cluster.Heartbeat = time.Duration(heartbeatMs) * time.Millisecond
			cfg.Cluster.ElectionTimeout = time.Duration(electionMs) * time.Millisecond
			return store.Run(cmd.Context(), cfg, log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Name, "name", "default", "human-readable name of this member")
	f.StringVar(&cfg.DataDir, "data-dir", "/var/lib/quantykube/store", "directory of the store's data")
	f.StringVar(&listen, "listen-client-urls", store.DefaultClientURL, "comma-separated URLs to serve the etcd v3 API on")
	f.StringVar(&advertise, "advertise-client-urls", "", "comma-separated client URLs to advertise (default: the listen URLs)")
	f.StringVar(&metrics, "listen-metrics-urls", "", "comma-separated URLs to serve /metrics, /health and /readyz on")
	f.StringVar(&cfg.CertFile, "cert-file", "", "TLS certificate of the client listeners")
	f.StringVar(&cfg.KeyFile, "key-file", "", "TLS key of the client listeners")
	f.StringVar(&cfg.TrustedCAFile, "trusted-ca-file", "", "CA that signs client certificates")
	f.BoolVar(&cfg.ClientCertAuth, "client-cert-auth", false, "refuse clients without a certificate signed by --trusted-ca-file")
	f.DurationVar(&cfg.WatchProgressNotify, "watch-progress-notify-interval", 0, "how often idle watchers that asked for progress notifications get one (default 10m)")
	f.BoolVar(&cfg.UnsafeNoFsync, "unsafe-no-fsync", false, "acknowledge writes before they are on disk (tests only: a crash loses them)")
	f.IntVar(&cfg.MaxRequestBytes, "max-request-bytes", 1536*1024, "largest request accepted, in bytes")
	f.IntVar(&cfg.MaxTxnOps, "max-txn-ops", 128, "most operations in one txn branch")
	f.Int64Var(&cfg.QuotaBackendBytes, "quota-backend-bytes", 0, "reported backend quota in bytes (0: none; pebble needs no defragmentation)")
	f.Int64Var(&cfg.CacheBytes, "cache-bytes", mvcc.DefaultCacheSize, "block cache for data blocks, in bytes (pebble's memtables come on top: at most 3 × --memtable-bytes)")
	f.Int64Var(&cfg.MemTableBytes, "memtable-bytes", mvcc.DefaultMemTableSize, "size of one memtable, in bytes: pebble holds up to 3 (one filling, one flushing, one kept for reuse); larger means fewer flushes and more memory")
	f.IntVar(&cfg.L0CompactionThreshold, "l0-compaction-threshold", mvcc.DefaultL0CompactionThreshold, "L0 sublevels at which pebble compacts L0 into the base level: higher rewrites a key's older versions less often (less write CPU), lower keeps reads consulting fewer files (pebble's default: 4; ADR 014)")
	f.Int64Var(&cfg.MemoryLimitBytes, "memory-limit-bytes", 0, "Go's soft memory limit in bytes (0: GOMEMLIMIT or none); without cgo it covers pebble's memtables and cache too")
	f.BoolVar(&cfg.GCExcludeEngineMemory, "gc-exclude-engine-memory", true, "pace Go's GC on the heap without pebble's memtables and block cache, which are Go heap in a build without cgo (as shipped) and are freed by pebble, not collected; false: GOGC applies to them too (ADR 013)")
	f.DurationVar(&cfg.GCBusyWindow, "gc-busy-window", 250*time.Millisecond, "while the store allocates fast, the paced GC's headroom is at least what it allocated in this window (a GC cycle at most about once a window), never more than GOGC gives the whole heap; the memory goes back to the OS when the load stops; 0: the 16 MiB floor alone (ADR 013)")
	f.BoolVar(&cfg.RangeReadAhead, "range-read-ahead", true, "read the next page of a paginated range (a limit, the first page's revision) while the client decodes the current one, when no write arrived in the last 10 ms: paged lists faster, writers first (ADR 012)")
	f.BoolVar(&cfg.EnablePprof, "enable-pprof", false, "serve Go's profiler under /debug/pprof on the metrics URLs")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	// Clustering, with etcd's names and meanings. Without --listen-peer-urls
	// and --initial-cluster the store is a single member without raft.
	f.StringVar(&cfg.Cluster.InitialCluster, "initial-cluster", "", "initial cluster configuration for bootstrapping, name=peerURL,... (clustering on)")
	f.StringVar(&cfg.Cluster.InitialClusterState, "initial-cluster-state", "new", "new (bootstrap a cluster) or existing (join one after etcdctl member add)")
	f.StringVar(&cfg.Cluster.InitialClusterToken, "initial-cluster-token", "etcd-cluster", "initial cluster token, part of member and cluster ids")
	f.StringVar(&advertisePeer, "initial-advertise-peer-urls", "", "comma-separated peer URLs of this member to advertise to the cluster (default: --listen-peer-urls)")
	f.StringVar(&listenPeer, "listen-peer-urls", "", "comma-separated URLs to listen on for peer traffic (clustering on)")
	f.StringVar(&cfg.Cluster.PeerTLS.CertFile, "peer-cert-file", "", "TLS certificate of the peer listeners and of connections to peers")
	f.StringVar(&cfg.Cluster.PeerTLS.KeyFile, "peer-key-file", "", "TLS key of the peer certificate")
	f.StringVar(&cfg.Cluster.PeerTLS.TrustedCAFile, "peer-trusted-ca-file", "", "CA that signs peer certificates")
	f.BoolVar(&cfg.Cluster.PeerTLS.ClientCertAuth, "peer-client-cert-auth", false, "refuse peers without a certificate signed by --peer-trusted-ca-file")
	f.UintVar(&heartbeatMs, "heartbeat-interval", 100, "time (in milliseconds) of a raft heartbeat interval")
	f.UintVar(&electionMs, "election-timeout", 1000, "time (in milliseconds) for a raft election timeout")
	f.Uint64Var(&cfg.Cluster.SnapshotCount, "snapshot-count", 10000, "applied entries between raft snapshots (the log is truncated behind them)")
	f.BoolVar(&cfg.Cluster.StrictReconfigCheck, "strict-reconfig-check", true, "refuse member changes that would lose quorum (etcd's default)")
	cmd.AddCommand(newStoreRestoreCommand(), newStoreMirrorCommand(), newStoreServeSnapshotCommand())
	return cmd
}
