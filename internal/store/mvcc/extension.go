package mvcc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Extensions are the store's own replicated writes besides etcd's
// InternalRaftRequests: a change of the store's mode (package mirror), a
// notice that every member observes at the same point of the log, and a
// batch of revisions replayed from another cluster. A replicated member
// carries them in raft entries of their own encoding (EncodeExtension), so
// every entry etcd's tools can decode stays etcd's; a single store hands
// them to its committer. Both paths apply them with writeTxn.applyExtension.
type Extension struct {
	Mode   *ModeChange
	Notice []byte
	Replay *ReplayBatch
}

// ModeChange replaces the store's mode record (opaque here; package mirror
// defines it). It applies only if Epoch is the store's current mode epoch
// and, when AtRev is set, the store's revision is AtRev: every member
// decides the same way, so a transition either happens everywhere at the
// same index or nowhere. An applied change raises the epoch by one.
type ModeChange struct {
	Epoch uint64
	AtRev int64
	// Record is the new mode record, persisted at m/mode.
	Record []byte
	// HoldLeases stops lease expiry while set (the leases belong to the
	// cluster the store mirrors); it is persisted with the record.
	HoldLeases bool
	// AcceptReplay lets replayed revisions in (ReplayBatch.Txns) while set:
	// a batch proposed by a replay that the mode has since ended (a cut-over)
	// never applies. Persisted with the record.
	AcceptReplay bool
	// RenewLeases gives every lease its full TTL again, from the apply.
	RenewLeases bool
}

// ReplayBatch applies consecutive revisions of another cluster, each as one
// transaction, with the lease grants they need first and the revokes of
// leases that other cluster no longer has last.
type ReplayBatch struct {
	// Grants are granted unless they exist, before the transactions.
	Grants []LeaseGrant
	// Txns are applied in order; the first must be at the store's revision
	// plus one, each next one at the revision after.
	Txns []ReplayTxn
	// Revokes are revoked after the transactions, each only if it exists
	// and has no key attached (a revoke that would delete keys would change
	// the revision: the other cluster deleted them in revisions of its own).
	Revokes []int64
}

// LeaseGrant is a lease granted with a given id and TTL.
type LeaseGrant struct{ ID, TTL int64 }

// ReplayTxn is one replayed revision: the transaction that, applied at Rev-1,
// makes Rev.
type ReplayTxn struct {
	Rev int64
	Txn *pb.TxnRequest
}

// ModeEvent tells a mode observer about an applied mode change (Epoch and
// Record are the new ones) or notice.
type ModeEvent struct {
	Epoch  uint64
	Record []byte
	Notice []byte
}

var (
	// ErrModeConflict refuses a mode change proposed against an epoch that
	// is no longer current (another change applied first).
	ErrModeConflict = errors.New("mvcc: the store's mode changed meanwhile")
	// ErrRevisionMoved refuses a mode change whose AtRev is not the store's
	// revision any more.
	ErrRevisionMoved = errors.New("mvcc: the store's revision moved meanwhile")
	// ErrReplayOrder refuses a replay batch that does not start right after
	// the store's revision (a stale or reordered proposal): nothing applied.
	ErrReplayOrder = errors.New("mvcc: replayed revisions out of order")
	// ErrNotReplaying refuses replayed revisions while the mode does not
	// accept them (ModeChange.AcceptReplay): nothing applied.
	ErrNotReplaying = errors.New("mvcc: the store takes no replayed revisions in its mode")
	// ErrReplayDiverged is returned when a replayed transaction does not
	// find the state the other cluster had before it, or does not make the
	// revision it had: the two have diverged.
	ErrReplayDiverged = errors.New("mvcc: replayed revision diverged")
)

// ExtensionProposer replicates extensions (package replica implements it
// besides Proposer).
type ExtensionProposer interface {
	ProposeExtension(ctx context.Context, x *Extension) (any, error)
}

// extState is the store's mode and its observers.
type extState struct {
	mu sync.Mutex
	// epoch and record are the mode as committed (what readers and the
	// observers see).
	epoch     uint64
	record    []byte
	observers []func(ModeEvent)
	// evalEpoch and evalFlags are the mode as the applying goroutine has
	// evaluated it (a group not yet durable included): later requests of
	// the same or the next group are evaluated against them, as the lessor
	// keeps leases, without reading the group's batch back.
	evalEpoch  uint64
	evalFlags  modeFlags
	holdLeases atomic.Bool
	revs       revWaiters
}

var metaMode = []byte("m/mode")

// submitExt applies x through the proposer or the committer.
func (s *Store) submitExt(ctx context.Context, x *Extension) (any, error) {
	if p := s.proposer.Load(); p != nil {
		xp, ok := (*p).(ExtensionProposer)
		if !ok {
			return nil, errors.New("mvcc: the proposer cannot replicate the store's own entries")
		}
		return xp.ProposeExtension(ctx, x)
	}
	return s.write(ctx, func(w *writeTxn) (any, error) { return w.applyExtension(x) })
}

// ChangeMode applies a mode change (see ModeChange).
func (s *Store) ChangeMode(ctx context.Context, c *ModeChange) error {
	_, err := s.submitExt(ctx, &Extension{Mode: c})
	return err
}

// Notify makes every member's mode observers see notice, at this point of
// the log.
func (s *Store) Notify(ctx context.Context, notice []byte) error {
	_, err := s.submitExt(ctx, &Extension{Notice: notice})
	return err
}

// Replay applies a replay batch and returns the store's revision after it.
// On an error, the transactions before the failing one are applied (they
// are consecutive revisions of the other cluster) and the error says which
// revision failed.
func (s *Store) Replay(ctx context.Context, b *ReplayBatch) (int64, error) {
	resp, err := s.submitExt(ctx, &Extension{Replay: b})
	if err != nil {
		return 0, err
	}
	return resp.(int64), nil
}

// ObserveMode registers fn for every later mode event and returns the
// current epoch and record, atomically: no event is missed or seen twice.
// fn runs after the change is committed, on the applying goroutine: it must
// not block.
func (s *Store) ObserveMode(fn func(ModeEvent)) (uint64, []byte) {
	st := &s.ext
	st.mu.Lock()
	defer st.mu.Unlock()
	st.observers = append(st.observers, fn)
	return st.epoch, st.record
}

// Mode returns the current mode epoch and record.
func (s *Store) Mode() (uint64, []byte) {
	s.ext.mu.Lock()
	defer s.ext.mu.Unlock()
	return s.ext.epoch, s.ext.record
}

// LeasesHeld reports whether lease expiry is held by the mode.
func (s *Store) LeasesHeld() bool { return s.ext.holdLeases.Load() }

func (s *Store) publishMode(ev ModeEvent, f *modeFlags) {
	st := &s.ext
	st.mu.Lock()
	if ev.Notice == nil {
		st.epoch, st.record = ev.Epoch, ev.Record
		if f != nil {
			st.holdLeases.Store(*f&flagHoldLeases != 0)
		}
	}
	obs := append([]func(ModeEvent){}, st.observers...)
	st.mu.Unlock()
	for _, fn := range obs {
		fn(ev)
	}
}

// loadMode reads m/mode (at open, and after a state snapshot replaced the
// data) and tells the observers when it changed.
func (s *Store) loadMode() error {
	v, err := s.get(s.db, metaMode)
	if err != nil {
		return err
	}
	epoch, flags, record, err := decodeModeValue(v)
	if err != nil {
		return fmt.Errorf("%w in data dir %s; the data dir is damaged", err, s.dir)
	}
	s.ext.mu.Lock()
	s.ext.evalEpoch, s.ext.evalFlags = epoch, flags
	s.ext.mu.Unlock()
	cur, _ := s.Mode()
	if v == nil && cur == 0 {
		s.ext.holdLeases.Store(s.opts.HoldLeases)
		return nil
	}
	s.publishMode(ModeEvent{Epoch: epoch, Record: record}, &flags)
	return nil
}

// modeFlags are the mode's effects on the store, persisted with the record.
type modeFlags byte

const (
	flagHoldLeases modeFlags = 1 << iota
	flagAcceptReplay
)

func (c *ModeChange) flags() modeFlags {
	var f modeFlags
	if c.HoldLeases {
		f |= flagHoldLeases
	}
	if c.AcceptReplay {
		f |= flagAcceptReplay
	}
	return f
}

// m/mode is the epoch (8 bytes), the flags (1 byte), then the record.
func encodeModeValue(epoch uint64, f modeFlags, record []byte) []byte {
	return append(append(putInt64(int64(epoch)), byte(f)), record...)
}

func decodeModeValue(v []byte) (epoch uint64, f modeFlags, record []byte, err error) {
	if v == nil {
		return 0, 0, nil, nil
	}
	if len(v) < 9 {
		return 0, 0, nil, fmt.Errorf("malformed %s", metaMode)
	}
	e, _ := getInt64(v[:8])
	return uint64(e), modeFlags(v[8]), append([]byte(nil), v[9:]...), nil
}

// modeAt returns the mode's epoch and flags as evaluated so far (earlier
// changes of the group included).
func (w *writeTxn) modeAt() (uint64, modeFlags) {
	w.s.ext.mu.Lock()
	defer w.s.ext.mu.Unlock()
	return w.s.ext.evalEpoch, w.s.ext.evalFlags
}

// applyExtension evaluates one extension against the group's batch.
func (w *writeTxn) applyExtension(x *Extension) (any, error) {
	switch {
	case x.Mode != nil:
		return nil, w.applyMode(x.Mode)
	case x.Notice != nil:
		n := x.Notice
		w.afterCommit = append(w.afterCommit, func() { w.s.publishMode(ModeEvent{Notice: n}, nil) })
		return nil, nil
	case x.Replay != nil:
		return w.applyReplay(x.Replay)
	}
	return nil, ErrUnknownRequest
}

func (w *writeTxn) applyMode(c *ModeChange) error {
	epoch, _ := w.modeAt()
	if c.Epoch != epoch {
		return ErrModeConflict
	}
	if c.AtRev != 0 && c.AtRev != w.currentRev() {
		return fmt.Errorf("%w: at %d, not %d", ErrRevisionMoved, w.currentRev(), c.AtRev)
	}
	next, flags, record := epoch+1, c.flags(), append([]byte(nil), c.Record...)
	_ = w.b.Set(metaMode, encodeModeValue(next, flags, record), nil)
	w.s.ext.mu.Lock()
	w.s.ext.evalEpoch, w.s.ext.evalFlags = next, flags
	w.s.ext.mu.Unlock()
	renew := c.RenewLeases
	w.afterCommit = append(w.afterCommit, func() {
		w.s.publishMode(ModeEvent{Epoch: next, Record: record}, &flags)
		if renew {
			w.s.PromoteLeases(0)
		}
	})
	return nil
}
