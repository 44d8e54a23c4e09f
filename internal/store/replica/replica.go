package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/pkg/v3/idutil"
	"go.etcd.io/etcd/pkg/v3/wait"
	"go.etcd.io/etcd/server/v3/etcdserver/api/rafthttp"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	stats "go.etcd.io/etcd/server/v3/etcdserver/api/v2stats"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// Replica is one member of a replicated store.
type Replica struct {
	cfg   Config
	log   *slog.Logger
	zlog  *zap.Logger
	store *mvcc.Store

	id, clusterID uint64

	node        raft.Node
	storage     *raft.MemoryStorage
	wal         *wal.WAL
	snapshotter *snap.Snapshotter
	transport   *rafthttp.Transport
	peerServers []*http.Server

	lead      atomic.Uint64
	term      atomic.Uint64
	committed atomic.Uint64
	applied   atomic.Uint64
	isLearner atomic.Bool

	// Owned by the run loop. confState is raft's configuration as of the
	// applied index (set by every applied or replayed conf change, a
	// bootstrap, a restart and an installed snapshot); maybeSnapshot
	// records it in each raft snapshot, so it must never be nil once a
	// conf change was applied.
	confState *raftpb.ConfState
	snapIndex uint64
	// delivered is raft's applied index: the last committed entry raft
	// handed to apply, replays after a restart included. It can be below
	// applied (the store's) while raft replays what the store holds
	// already; raft reads the entries after it from the in-memory log, so
	// a snapshot is taken at delivered, never past it (maybeSnapshot).
	delivered uint64
	peers     map[types.ID]bool
	// confAnswers are the results of the conf changes applied since the
	// last Advance, answered to their proposers only after it (see
	// answerConfChanges).
	confAnswers []confAnswer

	reqIDs    *idutil.Generator
	waits     wait.Wait
	applyWait wait.WaitTime
	reads     *readIndexer

	leaderMu      sync.Mutex
	leaderChanged chan struct{} // closed and replaced when the leader changes

	// published is closed once publish succeeded (see Published).
	published chan struct{}

	stopOnce sync.Once
	stopc    chan struct{}
	donec    chan struct{}
	// errc receives the error that stopped the member (a failed disk, a
	// corrupt log, its removal from the cluster).
	errc chan error
}

// requestTimeout is how long a proposal or a read waits, as etcd's
// (5 s plus two election timeouts).
func (r *Replica) requestTimeout() time.Duration { return 5*time.Second + 2*r.cfg.ElectionTimeout }

// ID returns the member id.
func (r *Replica) ID() uint64 { return r.id }

// ClusterID returns the cluster id.
func (r *Replica) ClusterID() uint64 { return r.clusterID }

// Done is closed once the member has stopped; Err then tells why.
func (r *Replica) Done() <-chan struct{} { return r.donec }

// Err returns the error that stopped the member, if any.
func (r *Replica) Err() error {
	select {
	case err := <-r.errc:
		r.errc <- err
		return err
	default:
		return nil
	}
}

// IsLeader reports whether this member leads (mvcc.Proposer).
func (r *Replica) IsLeader() bool { return r.lead.Load() == r.id }

// Leader returns the leader's id, 0 if none is known.
func (r *Replica) Leader() uint64 { return r.lead.Load() }

// Status is what Maintenance.Status reports about raft.
type Status struct {
	Leader, Term, Index, Applied uint64
	IsLearner                    bool
}

// Status returns the member's raft status.
func (r *Replica) Status() Status {
	return Status{Leader: r.lead.Load(), Term: r.term.Load(), Index: r.committed.Load(), Applied: r.applied.Load(), IsLearner: r.isLearner.Load()}
}

// Stop stops raft, the transport and the peer listeners. The store is the
// caller's to close afterwards.
func (r *Replica) Stop() {
	r.stopOnce.Do(func() { close(r.stopc) })
	<-r.donec
}

// fail stops the member because of err, logged as one line that names the
// problem and the fix.
func (r *Replica) fail(err error) {
	r.log.Debug("member stopping", "err", err) // Run returns err: main prints it as the one line
	select {
	case r.errc <- err:
	default:
	}
	r.stopOnce.Do(func() { close(r.stopc) })
}

func (r *Replica) leaderChange() <-chan struct{} {
	r.leaderMu.Lock()
	defer r.leaderMu.Unlock()
	return r.leaderChanged
}

// setLeader records a new leader; a member that becomes leader first
// renews every lease (etcd's lessor.Promote), then may expire them.
func (r *Replica) setLeader(lead uint64) {
	old := r.lead.Swap(lead)
	if old == lead {
		return
	}
	// Every member renews its leases' expiry: the new leader so that none
	// expires because of the election (etcd's lessor.Promote), the others
	// so that TimeToLive answers close to the leader's.
	r.store.PromoteLeases(r.cfg.ElectionTimeout)
	r.log.Info("raft leader changed", "member", types.ID(r.id).String(), "leader", types.ID(lead).String(), "term", r.term.Load())
	r.leaderMu.Lock()
	close(r.leaderChanged)
	r.leaderChanged = make(chan struct{})
	r.leaderMu.Unlock()
}

// Propose replicates req and returns what its local apply returned
// (mvcc.Proposer). Errors are etcd's: no leader, timeout, stopped.
func (r *Replica) Propose(ctx context.Context, req *pb.InternalRaftRequest) (any, error) {
	if r.isLearner.Load() && req.ClusterMemberAttrSet == nil {
		return nil, rpctypes.ErrGRPCNotSupportedForLearner
	}
	id := r.reqIDs.Next()
	req.Header = &pb.RequestHeader{ID: id}
	data, err := marshalRequest(req)
	if err != nil {
		return nil, err
	}
	return r.proposeData(ctx, id, data)
}

// proposeData proposes an encoded entry and waits for its local apply, whose
// result is triggered under id.
func (r *Replica) proposeData(ctx context.Context, id uint64, data []byte) (any, error) {
	if r.cfg.MaxRequestBytes > 0 && len(data) > r.cfg.MaxRequestBytes+512*1024 {
		return nil, rpctypes.ErrGRPCRequestTooLarge
	}
	ch := r.waits.Register(id)
	cctx, cancel := context.WithTimeout(ctx, r.requestTimeout())
	defer cancel()
	if err := r.node.Propose(cctx, data); err != nil {
		r.waits.Trigger(id, nil)
		return nil, r.proposeErr(cctx, err)
	}
	select {
	case x := <-ch:
		if x == nil {
			return nil, rpctypes.ErrGRPCStopped
		}
		res := x.(mvcc.Result)
		return res.Resp, res.Err
	case <-cctx.Done():
		r.waits.Trigger(id, nil)
		return nil, r.proposeErr(cctx, cctx.Err())
	case <-r.stopc:
		return nil, rpctypes.ErrGRPCStopped
	}
}

// proposeErr maps a failed or timed-out proposal to etcd's error.
func (r *Replica) proposeErr(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, raft.ErrStopped):
		return rpctypes.ErrGRPCStopped
	case r.lead.Load() == raft.None:
		return rpctypes.ErrGRPCNoLeader
	case errors.Is(err, raft.ErrProposalDropped):
		return rpctypes.ErrGRPCLeaderChanged
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return rpctypes.ErrGRPCTimeout
	case errors.Is(ctx.Err(), context.Canceled):
		return rpctypes.ErrGRPCCanceled
	}
	return fmt.Errorf("propose: %w", err)
}

// newTransport builds etcd's peer transport for this member.
func (r *Replica) newTransport() (*rafthttp.Transport, error) {
	urls, err := types.NewURLs(r.cfg.AdvertisePeerURLs)
	if err != nil {
		return nil, err
	}
	t := &rafthttp.Transport{
		Logger:      r.zlog,
		DialTimeout: time.Second + r.cfg.Heartbeat,
		TLSInfo:     r.cfg.PeerTLS,
		ID:          types.ID(r.id),
		URLs:        urls,
		ClusterID:   types.ID(r.clusterID),
		Raft:        (*raftHandler)(r),
		Snapshotter: r.snapshotter,
		ServerStats: stats.NewServerStats(r.cfg.Name, types.ID(r.id).String()),
		LeaderStats: stats.NewLeaderStats(r.zlog, types.ID(r.id).String()),
		ErrorC:      make(chan error, 1),
	}
	return t, t.Start()
}

// raftHandler is the transport's view of the member (rafthttp.Raft).
type raftHandler Replica

func (h *raftHandler) Process(ctx context.Context, m *raftpb.Message) error {
	r := (*Replica)(h)
	if r.store.IsRemoved(m.GetFrom()) {
		return errors.New("the sender was removed from the cluster")
	}
	return r.node.Step(ctx, m)
}

func (h *raftHandler) IsIDRemoved(id uint64) bool { return (*Replica)(h).store.IsRemoved(id) }

func (h *raftHandler) ReportUnreachable(id uint64) { (*Replica)(h).node.ReportUnreachable(id) }

func (h *raftHandler) ReportSnapshot(id uint64, status raft.SnapshotStatus) {
	(*Replica)(h).node.ReportSnapshot(id, status)
}
