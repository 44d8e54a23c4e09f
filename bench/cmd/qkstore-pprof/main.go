// Command qkstore-pprof is QuantyKube's store with net/http/pprof beside it,
// for profiling the store under the benchmark's workloads (the store itself
// has no pprof endpoint). It runs store.Run exactly as `quantykube store`
// does, with the same defaults.
//
//	qkstore-pprof --data-dir D --listen-client-urls http://127.0.0.1:P --pprof 127.0.0.1:Q
//	go tool pprof -top http://127.0.0.1:Q/debug/pprof/profile?seconds=10
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof on http.DefaultServeMux
	"os"
	"os/signal"
	"syscall"

	"github.com/quantyroot/quantykube/internal/store"
	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

func main() {
	var cfg store.Config
	var listen, pprofAddr string
	flag.StringVar(&cfg.DataDir, "data-dir", "", "directory of the store's data")
	flag.StringVar(&listen, "listen-client-urls", "", "URL to serve the etcd v3 API on, e.g. http://127.0.0.1:2479")
	flag.StringVar(&pprofAddr, "pprof", "127.0.0.1:6060", "loopback address of the pprof HTTP endpoint")
	flag.Int64Var(&cfg.CacheBytes, "cache-bytes", mvcc.DefaultCacheSize, "block cache size in bytes (as quantykube store)")
	flag.Int64Var(&cfg.MemTableBytes, "memtable-bytes", mvcc.DefaultMemTableSize, "size of one memtable in bytes (as quantykube store)")
	flag.Parse()
	cfg.Name = "pprof"
	cfg.ListenClientURLs = store.SplitURLs(listen)
	cfg.MaxRequestBytes = 1536 * 1024
	cfg.MaxTxnOps = 128
	if cfg.DataDir == "" || listen == "" {
		fmt.Fprintln(os.Stderr, "qkstore-pprof: --data-dir and --listen-client-urls are required; pass both")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", pprofAddr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "qkstore-pprof: listen on --pprof %s: %v; pass a free loopback address\n", pprofAddr, err)
		os.Exit(1)
	}
	go func() { _ = http.Serve(ln, nil) }()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := store.Run(ctx, cfg, log); err != nil {
		fmt.Fprintln(os.Stderr, "qkstore-pprof:", err)
		os.Exit(1)
	}
}
