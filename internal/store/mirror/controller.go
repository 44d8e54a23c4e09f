package mirror

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// Controller is one member's side of the mirror: it routes the member's
// requests by mode (etcdapi.Mirror), serves the admin calls (api.Server),
// runs the replayer while the member leads, and runs the transitions.
type Controller struct {
	st  *mvcc.Store
	m   Member
	log *slog.Logger

	state    atomic.Pointer[memberState]
	inflight atomic.Int64 // admitted writes not yet answered
	progress Progress
	levels   chan LevelRequest
	notices  chan drainedNotice
	fence    *fence

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every mode change
	clients map[string]*clientv3.Client

	stopOnce sync.Once
	stopc    chan struct{}

	// beforeSwitch, when set (tests), runs before a transition levels.
	beforeSwitch func()
}

// memberState is the mode as this member applied it.
type memberState struct {
	epoch uint64
	rec   record
	// fwd sends writes to a mirror's source (nil otherwise, or when the
	// source cannot be used from here: peerErr).
	fwd     *forwarder
	peerErr error
	// appliedAt is when this member applied the mode; whileLeader whether
	// it led then (a hold is run by the leader that applied it).
	appliedAt   time.Time
	whileLeader bool
	// released is closed when the state is replaced (held writes go on).
	released chan struct{}
}

// New makes the controller of a store's member. It starts following the
// store's mode at once; Run must be called for the leader's work.
func New(st *mvcc.Store, m Member, log *slog.Logger) *Controller {
	c := &Controller{
		st: st, m: m, log: log,
		levels: make(chan LevelRequest), notices: make(chan drainedNotice, 256),
		changed: make(chan struct{}), clients: map[string]*clientv3.Client{}, stopc: make(chan struct{}),
	}
	c.fence = newFence(c)
	epoch, rec := st.ObserveMode(c.onModeEvent)
	c.install(epoch, rec)
	return c
}

// onModeEvent runs on the store's applying goroutine: it must not block.
func (c *Controller) onModeEvent(ev mvcc.ModeEvent) {
	if ev.Notice != nil {
		if n, ok := decodeNotice(ev.Notice); ok {
			select {
			case c.notices <- n:
			default:
				c.log.Warn("mirror: dropped a drain notice (nobody reads them)", "hold", n.Hold)
			}
		}
		return
	}
	c.install(ev.Epoch, ev.Record)
}

func (c *Controller) install(epoch uint64, b []byte) {
	rec, err := decodeRecord(b)
	if err != nil {
		c.log.Error("mirror: cannot read the store's mode; refusing writes", "err", err)
		rec = record{Mode: api.Mirror, Failed: err.Error()}
	}
	st := &memberState{epoch: epoch, rec: rec, appliedAt: time.Now(), whileLeader: c.m.IsLeader(), released: make(chan struct{})}
	if rec.Mode == api.Mirror && rec.Peer != nil {
		cli, err := c.client(*rec.Peer, "source")
		if err != nil {
			st.peerErr = err
		} else {
			st.fwd = newForwarder(c, cli)
		}
	}
	old := c.state.Swap(st)
	if old != nil {
		close(old.released)
		if old.epoch != epoch {
			c.log.Info("mirror: mode changed", "mode", rec.Mode, "epoch", epoch, "since", rec.Since, "hold", rec.Hold != nil, "failed", rec.Failed)
		}
	}
	c.mu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *Controller) changedCh() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// client returns the (shared) client of a peer; the files are checked first
// so that a member that cannot read them says which and why.
func (c *Controller) client(p api.Peer, role string) (*clientv3.Client, error) {
	if err := checkPeer(p, role); err != nil {
		return nil, err
	}
	key := peerKey(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if cli := c.clients[key]; cli != nil {
		return cli, nil
	}
	cli, err := newClient(p)
	if err != nil {
		return nil, err
	}
	c.clients[key] = cli
	return cli, nil
}

// Run does the leader's work (the replay, the transitions) and reports this
// member's drains, until ctx ends or Stop.
func (c *Controller) Run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.stopc:
			cancel()
		case <-ctx.Done():
		}
	}()
	go c.fence.loop(ctx)
	l := &loop{c: c, holds: map[string]bool{}}
	defer l.close()
	for {
		st := c.state.Load()
		lead := c.m.IsLeader()
		leaderCh, changed := c.m.LeaderChanged(), c.changedCh()
		l.reconcileReplay(ctx, st, lead)
		l.reconcileHold(ctx, st, lead)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-leaderCh:
		case <-l.replayDone():
		case <-time.After(time.Second):
		}
	}
}

// Stop ends Run and closes the peer clients.
func (c *Controller) Stop() {
	c.stopOnce.Do(func() { close(c.stopc) })
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, cli := range c.clients {
		_ = cli.Close()
		delete(c.clients, k)
	}
}
