package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/quantyroot/quantykube/internal/store/etcdapi"
	"github.com/quantyroot/quantykube/internal/store/mirror"
	mirrorapi "github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/mvcc"
	"github.com/quantyroot/quantykube/internal/store/replica"
	"github.com/quantyroot/quantykube/internal/store/snapshot"
)

// grpcOverheadBytes is what etcd allows above --max-request-bytes for the
// gRPC envelope.
const grpcOverheadBytes = 512 * 1024

// Run serves the store until ctx ends. It binds every listener before it
// opens the data dir, so a port in use changes nothing on disk. A client or
// metrics listener that stops serving before then (Serve failed) stops the
// store, and Run returns that failure: `quantykube store` prints it as its
// one line and exits 1. (A peer listener's failure stops the member, whose
// error Run returns the same way.)
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	return run(ctx, cfg, log, net.Listen)
}

// listenFunc binds a listener (net.Listen; tests pass one that fails).
type listenFunc func(network, addr string) (net.Listener, error)

func run(ctx context.Context, cfg Config, log *slog.Logger, listen listenFunc) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	tlsCfg, err := cfg.serverTLS()
	if err != nil {
		return err
	}
	clientLns, err := listenAll(listen, cfg.ListenClientURLs, "--listen-client-urls")
	if err != nil {
		return err
	}
	defer closeAll(clientLns)
	metricsLns, err := listenAll(listen, cfg.ListenMetricsURLs, "--listen-metrics-urls")
	if err != nil {
		return err
	}
	defer closeAll(metricsLns)

	applyMemoryLimit(cfg.MemoryLimitBytes, log)
	st, err := mvcc.Open(cfg.DataDir, cfg.storeOptions(log))
	if err != nil {
		return err
	}
	defer st.Close()
	stopPacing := paceGC(cfg, st, log)
	defer stopPacing()
	if gone, err := snapshot.RemoveLeftovers(cfg.DataDir); err != nil || len(gone) > 0 {
		log.Warn("removed what an interrupted snapshot left beside the data dir", "dirs", gone, "err", err)
	}
	if cfg.UnsafeNoFsync {
		log.Warn("--unsafe-no-fsync is set: acknowledged writes can be lost on a crash; tests only")
	}
	advertise := cfg.AdvertiseClientURLs
	if len(advertise) == 0 {
		advertise = cfg.ListenClientURLs
	}
	apiCfg := cfg.apiConfig(advertise, log)
	rep, memberDone, err := startMember(&cfg, &apiCfg, st, advertise, log)
	if err != nil {
		return err
	}
	if !waitPublished(ctx, rep) {
		rep.Stop()
		return rep.Err()
	}
	mctl, stopMirror := startMirror(ctx, st, rep, log)
	apiCfg.Mirror = mctl
	api := etcdapi.New(st, apiCfg)
	metrics := newMetrics(st, api)
	gsTLS, gsPlain := newGRPCServers(cfg, tlsCfg, metrics)
	hs := health.NewServer()
	for _, g := range []*grpc.Server{gsTLS, gsPlain} {
		api.Register(g)
		mirrorapi.Register(g, mctl)
		healthpb.RegisterHealthServer(g, hs)
	}

	errc := make(chan error, len(clientLns)+len(metricsLns))
	serveClients(clientLns, gsTLS, gsPlain, errc, log)
	httpServers := serveMetrics(cfg, metricsLns, tlsCfg, metrics, errc, log)
	ready(cfg, st, log)

	stopErr := waitStop(ctx, errc, memberDone, rep)
	log.Info("stopping store")
	for _, h := range httpServers {
		_ = h.Close()
	}
	stopGRPC(gsTLS, gsPlain)
	api.Stop()
	stopMirror()
	if rep != nil {
		rep.Stop() // before the store closes
	}
	stopPacing()
	if err := st.Close(); err != nil && stopErr == nil {
		return err
	}
	return stopErr
}

// apiConfig is the etcd API's configuration from the store's.
func (c *Config) apiConfig(advertise []string, log *slog.Logger) etcdapi.Config {
	return etcdapi.Config{
		Name: c.Name, ClientURLs: advertise, MaxRequestBytes: c.MaxRequestBytes, MaxTxnOps: c.MaxTxnOps,
		ProgressNotifyInterval: c.WatchProgressNotify, QuotaBackendBytes: c.QuotaBackendBytes, Logger: log,
		RangeReadAhead: c.RangeReadAhead,
	}
}

// ready says the store serves, then releases the binary's start-up pages
// (binpages_linux.go).
func ready(cfg Config, st *mvcc.Store, log *slog.Logger) {
	log.Info("store ready", "name", cfg.Name, "data-dir", cfg.DataDir, "revision", st.Rev(), "compacted", st.CompactedRev())
	if n, err := releaseBinaryPages(); err != nil {
		log.Info("the binary's start-up pages stay resident", "err", err)
	} else {
		log.Debug("released the binary's start-up pages", "bytes", n)
	}
}

// waitStop waits until ctx ends (nil), a listener stops serving (its
// failure: see listenerEnded) or the member stops on its own (its error).
// Nothing stops a listener before waitStop returns, so anything on errc is
// a failure.
func waitStop(ctx context.Context, errc <-chan error, memberDone <-chan struct{}, rep *replica.Replica) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	case <-memberDone:
		return rep.Err()
	}
}

// listenerEnded is the error of a listener whose Serve returned while the
// store runs: Serve returns early only when Accept fails for good (gRPC and
// net/http retry temporary accept errors).
func listenerEnded(what string, l boundListener, err error) error {
	if err == nil {
		err = errors.New("Serve returned without an error")
	}
	return fmt.Errorf("serving %s on %s stopped: %w", what, l.url, err)
}

// startMember makes the store a raft member when clustering flags are set;
// memberDone is closed if the member stops on its own (a failure, its
// removal).
func startMember(cfg *Config, apiCfg *etcdapi.Config, st *mvcc.Store, advertise []string, log *slog.Logger) (*replica.Replica, <-chan struct{}, error) {
	if !cfg.Clustered() {
		return nil, make(<-chan struct{}), nil
	}
	cfg.Cluster.ClientURLs = advertise
	rep, err := replica.Start(cfg.Cluster, st, log)
	if err != nil {
		return nil, nil, err
	}
	st.SetProposer(rep)
	apiCfg.Cluster = member{rep}
	return rep, rep.Done(), nil
}

// startMirror runs the member's mirror controller (docs/adr/202); stop
// ends it before the member and the store stop.
func startMirror(ctx context.Context, st *mvcc.Store, rep *replica.Replica, log *slog.Logger) (*mirror.Controller, func()) {
	var m mirror.Member = mirror.Single{MemberID: 1}
	if rep != nil {
		m = rep
	}
	c := mirror.New(st, m, log)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	return c, func() {
		cancel()
		<-done
		c.Stop()
	}
}

// serveClients serves the etcd API on the client listeners.
func serveClients(lns []boundListener, gsTLS, gsPlain *grpc.Server, errc chan<- error, log *slog.Logger) {
	for _, l := range lns {
		g := gsPlain
		if l.tls {
			g = gsTLS
		}
		go func(l boundListener) { errc <- listenerEnded("the etcd v3 API", l, g.Serve(l.Listener)) }(l)
		log.Info("serving etcd v3 API", "url", l.url)
	}
}

// serveMetrics serves /metrics, /health, /readyz (and pprof) on the
// metrics listeners.
func serveMetrics(cfg Config, lns []boundListener, tlsCfg *tls.Config, metrics *metrics, errc chan<- error, log *slog.Logger) []*http.Server {
	mux := http.NewServeMux()
	metrics.register(mux)
	if cfg.EnablePprof {
		registerPprof(mux)
	}
	var httpServers []*http.Server
	for _, l := range lns {
		hsrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		if l.tls {
			hsrv.TLSConfig = tlsCfg
			go func(l boundListener) { errc <- listenerEnded("metrics", l, hsrv.ServeTLS(l.Listener, "", "")) }(l)
		} else {
			go func(l boundListener) { errc <- listenerEnded("metrics", l, hsrv.Serve(l.Listener)) }(l)
		}
		httpServers = append(httpServers, hsrv)
		log.Info("serving metrics and health", "url", l.url)
	}
	return httpServers
}

// newGRPCServers builds one gRPC server per TLS mode: https listeners get
// TLS, http ones not.
func newGRPCServers(cfg Config, tlsCfg *tls.Config, metrics *metrics) (gsTLS, gsPlain *grpc.Server) {
	maxReq := cfg.MaxRequestBytes
	if maxReq <= 0 {
		maxReq = 1536 * 1024
	}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxReq + grpcOverheadBytes),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.MaxConcurrentStreams(math.MaxUint32),
		// Unary calls run on a pool of long-lived goroutines whose stacks have
		// grown already, instead of a fresh goroutine per call (profiled: 26 %
		// of a read-heavy load was stack copying).
		grpc.NumStreamWorkers(streamWorkers),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Hour, Timeout: 20 * time.Second}),
		grpc.ChainUnaryInterceptor(metrics.unary),
		grpc.ChainStreamInterceptor(metrics.stream),
	}
	plain := len(opts)
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	return grpc.NewServer(opts...), grpc.NewServer(opts[:plain]...)
}

// stopGRPC stops the servers gracefully, forcibly after 2 s.
func stopGRPC(servers ...*grpc.Server) {
	stopped := make(chan struct{})
	go func() {
		for _, g := range servers {
			g.GracefulStop()
		}
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(2 * time.Second):
		for _, g := range servers {
			g.Stop()
		}
	}
}

type boundListener struct {
	net.Listener
	url string
	tls bool
}

func listenAll(listen listenFunc, urls []string, flag string) ([]boundListener, error) {
	var out []boundListener
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("%s %q: %w", flag, raw, err)
		}
		network, addr := "tcp", u.Host
		if strings.HasPrefix(u.Scheme, "unix") {
			network, addr = "unix", u.Host+u.Path
		}
		l, err := listen(network, addr)
		if err != nil {
			closeAll(out)
			if errors.Is(err, syscall.EADDRINUSE) {
				return nil, fmt.Errorf("%s %s: address already in use; stop the process holding it or pass another URL", flag, raw)
			}
			return nil, fmt.Errorf("%s %s: %w", flag, raw, err)
		}
		out = append(out, boundListener{Listener: l, url: raw, tls: u.Scheme == "https" || u.Scheme == "unixs"})
	}
	return out, nil
}

func closeAll(ls []boundListener) {
	for _, l := range ls {
		_ = l.Close()
	}
}

// streamWorkers is how many long-lived goroutines serve gRPC calls. A call
// that finds them all busy gets a goroutine of its own, whose stack grows
// (and is copied) on every call: with GOMAXPROCS workers (2 here), 64
// concurrent clients made 18 % of the store's CPU stack copying under
// range@64 (profile, 5 December). Idle workers cost their stacks only.
const streamWorkers = 128
