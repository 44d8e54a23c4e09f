// Package etcdapi serves the etcd v3 gRPC API (go.etcd.io/etcd/api/v3, as
// etcd 3.7 does) on top of the mvcc store: one file per service. It
// validates requests as etcd does, maps store errors to etcd's gRPC errors
// (rpctypes), and fills response headers.
package etcdapi

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// Version is the etcd version the server reports in Status. kube-apiserver
// parses it to decide whether consistent reads from its watch cache are safe
// (they need >= 3.4.31 and not 3.5.0–3.5.12); the API served is etcd 3.7's.
const Version = "3.7.3"

// Config describes the member the API reports.
type Config struct {
	// Name is the member name (etcd's --name).
	Name string
	// ClientURLs are the advertised client URLs.
	ClientURLs []string
	// MaxRequestBytes bounds a request's size (etcd default 1.5 MiB).
	MaxRequestBytes int
	// MaxTxnOps bounds the operations of one txn branch (etcd default 128).
	MaxTxnOps int
	// ProgressNotifyInterval is how often watchers that asked for progress
	// notifications get one when idle (etcd's default is 10 minutes).
	ProgressNotifyInterval time.Duration
	// QuotaBackendBytes, when set, is reported as the quota in Status.
	QuotaBackendBytes int64
	// Cluster is the member's replication; nil serves a single member.
	Cluster Cluster
	// Mirror routes writes and fences reads while the store mirrors or
	// replays onto another cluster (package mirror); nil: always local.
	Mirror Mirror
	// Logger receives the server's structured logs (default slog.Default()).
	Logger *slog.Logger
	// RangeReadAhead reads the next page of a paginated range while the
	// client decodes the current one, when writes are quiet (range_ahead.go).
	RangeReadAhead bool
}

// Server implements the etcd v3 services.
type Server struct {
	pb.UnimplementedKVServer
	pb.UnimplementedWatchServer
	pb.UnimplementedLeaseServer
	pb.UnimplementedClusterServer
	pb.UnimplementedMaintenanceServer

	store     *mvcc.Store
	cfg       Config
	clusterID uint64
	memberID  uint64
	cluster   Cluster
	ahead     readAheads
	// snapshots counts the Snapshot calls in flight: each holds a
	// temporary directory beside the data dir until it returns.
	snapshots sync.WaitGroup
}

// snapshotsStopWait bounds Stop's wait for the Snapshot calls in flight.
// gRPC's forced stop cancels their contexts; a snapshot being built or sent
// then removes its temporary directory within a chunk's write.
const snapshotsStopWait = 10 * time.Second

// Stop ends the server's background work (pages read ahead) and waits for
// it, and for the Snapshot calls in flight to remove their temporary
// directories (at most snapshotsStopWait); call it once the gRPC servers
// stopped, before the store closes. gRPC's Stop does not wait for its
// handlers: without this wait a SIGTERM during a snapshot could exit before
// the handler's cleanup ran and leave the directory behind (test/store
// TestSnapshotWhileWriting, seen under load).
func (s *Server) Stop() {
	s.ahead.stop()
	done := make(chan struct{})
	go func() { s.snapshots.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(snapshotsStopWait):
		s.cfg.Logger.Warn("snapshots still running at stop; their temporary directories are removed at the next start", "waited", snapshotsStopWait.String())
	}
}

// New returns a server for store.
func New(store *mvcc.Store, cfg Config) *Server {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 1536 * 1024
	}
	if cfg.MaxTxnOps <= 0 {
		cfg.MaxTxnOps = 128
	}
	if cfg.ProgressNotifyInterval <= 0 {
		cfg.ProgressNotifyInterval = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := fnv.New64a()
	h.Write([]byte("quantykube/" + cfg.Name))
	member := h.Sum64()
	h.Write([]byte("/cluster"))
	s := &Server{store: store, cfg: cfg, memberID: member, clusterID: h.Sum64(), cluster: cfg.Cluster}
	if s.cluster == nil {
		s.cluster = singleMember{s}
	}
	s.memberID, s.clusterID = s.cluster.MemberID(), s.cluster.ClusterID()
	return s
}

// Register adds every service to g. KV.Range is served by rangeHandler,
// whose replies the process's proto codec marshals (codec.go).
func (s *Server) Register(g *grpc.Server) {
	kv := pb.KV_ServiceDesc
	kv.Methods = slices.Clone(kv.Methods)
	i := slices.IndexFunc(kv.Methods, func(m grpc.MethodDesc) bool { return m.MethodName == "Range" })
	if i < 0 {
		panic("etcdapi: the etcd KV service has no Range method")
	}
	kv.Methods[i].Handler = s.rangeHandler
	g.RegisterService(&kv, s)
	pb.RegisterWatchServer(g, s)
	pb.RegisterLeaseServer(g, s)
	pb.RegisterClusterServer(g, s)
	pb.RegisterMaintenanceServer(g, s)
}

// header returns a response header at rev.
func (s *Server) header(rev int64) *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: s.clusterID, MemberId: s.memberID, Revision: rev, RaftTerm: s.cluster.RaftStatus().Term}
}

// fill completes a header the store started (it sets only the revision).
func (s *Server) fill(h *pb.ResponseHeader) *pb.ResponseHeader {
	if h == nil {
		return s.header(s.store.Rev())
	}
	h.ClusterId, h.MemberId, h.RaftTerm = s.clusterID, s.memberID, s.cluster.RaftStatus().Term
	return h
}

// toGRPC maps a store error to the gRPC error etcd returns for it.
func toGRPC(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, mvcc.ErrCompacted):
		return rpctypes.ErrGRPCCompacted
	case errors.Is(err, mvcc.ErrFutureRev):
		return rpctypes.ErrGRPCFutureRev
	case errors.Is(err, mvcc.ErrKeyNotFound):
		return rpctypes.ErrGRPCKeyNotFound
	case errors.Is(err, mvcc.ErrLeaseNotFound):
		return rpctypes.ErrGRPCLeaseNotFound
	case errors.Is(err, mvcc.ErrLeaseExists):
		return rpctypes.ErrGRPCLeaseExist
	case errors.Is(err, mvcc.ErrLeaseTTLLarge):
		return rpctypes.ErrGRPCLeaseTTLTooLarge
	case errors.Is(err, mvcc.ErrDuplicateKey):
		return rpctypes.ErrGRPCDuplicateKey
	case errors.Is(err, mvcc.ErrEmptyKey):
		return rpctypes.ErrGRPCEmptyKey
	case errors.Is(err, mvcc.ErrClosed):
		return rpctypes.ErrGRPCStopped
	case errors.Is(err, mvcc.ErrRestoring):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, mvcc.ErrFailed):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled):
		return rpctypes.ErrGRPCCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return rpctypes.ErrGRPCDeadlineExceeded
	}
	return status.Error(codes.Internal, err.Error())
}
