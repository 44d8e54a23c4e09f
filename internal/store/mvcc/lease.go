package mvcc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// MaxLeaseTTL is the largest TTL a lease may be granted with (etcd's).
const MaxLeaseTTL = 9_000_000_000

// Lease is a granted lease as TimeToLive and Leases report it.
type Lease struct {
	ID         int64
	GrantedTTL int64
	// Remaining is the time left before expiry (never negative).
	Remaining time.Duration
	Keys      [][]byte
}

type lease struct {
	id     int64
	ttl    int64
	expiry time.Time
	keys   map[string]struct{}
}

// lessor keeps the granted leases in memory; grants and revokes are
// persisted through the committer (s/<id> holds the TTL and the absolute
// expiry), keep-alives update the expiry on disk without an fsync. After a
// restart a lease keeps its remaining TTL; the keys attached to it are found
// again by scanning the live keyspace.
//
// Expiry revokes the lease through the committer: its keys are deleted in
// one revision and watchers see DELETE events.
type lessor struct {
	s      *Store
	mu     sync.Mutex
	leases map[int64]*lease
}

func newLessor(s *Store) *lessor {
	return &lessor{s: s, leases: map[int64]*lease{}}
}

func encodeLease(ttl int64, expiry time.Time) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(ttl))
	return binary.BigEndian.AppendUint64(b, uint64(expiry.UnixNano()))
}

// reload forgets the leases in memory and loads them from disk again (after
// a state snapshot replaced the data).
func (l *lessor) reload() error {
	l.mu.Lock()
	l.leases = map[int64]*lease{}
	l.mu.Unlock()
	return l.load()
}

// load restores the leases and their attached keys from disk.
func (l *lessor) load() error {
	it, err := l.s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixLease}, UpperBound: []byte{prefixLease + 1}})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		k, v := it.Key(), it.Value()
		if len(k) != 9 || len(v) != 16 {
			it.Close()
			return fmt.Errorf("malformed lease record %q; the data dir is damaged", k)
		}
		id := int64(binary.BigEndian.Uint64(k[1:]))
		l.leases[id] = &lease{
			id:     id,
			ttl:    int64(binary.BigEndian.Uint64(v[:8])),
			expiry: time.Unix(0, int64(binary.BigEndian.Uint64(v[8:]))),
			keys:   map[string]struct{}{},
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	return scanLive(l.s.db, nil, []byte{0}, []byte{0}, false, func(e *entry) error {
		if e.lease != 0 {
			if ls := l.leases[e.lease]; ls != nil {
				ls.keys[string(e.key)] = struct{}{}
			}
		}
		return nil
	})
}

func (l *lessor) exists(id int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leases[id] != nil
}

func (l *lessor) attach(id int64, key []byte) {
	if id == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls := l.leases[id]; ls != nil {
		ls.keys[string(key)] = struct{}{}
	}
}

func (l *lessor) detach(id int64, key []byte) {
	if id == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls := l.leases[id]; ls != nil {
		delete(ls.keys, string(key))
	}
}

// LeaseGrant grants a lease. id 0 lets the store choose one (chosen here,
// before the request is replicated, so that every member applies the same
// id). A TTL below the minimum is raised to it; the granted TTL is returned.
func (s *Store) LeaseGrant(ctx context.Context, id, ttl int64) (int64, int64, error) {
	id, ttl, _, err := s.LeaseGrantRev(ctx, id, ttl)
	return id, ttl, err
}

// LeaseGrantRev is LeaseGrant that also returns the store's revision at the
// grant's apply, the revision etcd puts in the response's header (a later
// one would tell a linearizability checker the grant happened after writes
// it preceded).
func (s *Store) LeaseGrantRev(ctx context.Context, id, ttl int64) (int64, int64, int64, error) {
	if ttl > MaxLeaseTTL {
		return 0, 0, 0, ErrLeaseTTLLarge
	}
	if ttl < s.opts.MinLeaseTTL {
		ttl = s.opts.MinLeaseTTL
	}
	pick := id == 0
	for attempt := 0; ; attempt++ {
		if pick {
			id = s.lessor.unusedID()
		}
		resp, err := s.submit(ctx, &pb.InternalRaftRequest{LeaseGrant: &pb.LeaseGrantRequest{ID: id, TTL: ttl}})
		if errors.Is(err, ErrLeaseExists) && pick && attempt < 3 {
			continue // another grant took the id meanwhile
		}
		if err != nil {
			return 0, 0, 0, err
		}
		return id, ttl, resp.(int64), nil
	}
}

func (l *lessor) unusedID() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if id := rand.Int64N(1 << 62); id != 0 && l.leases[id] == nil {
			return id
		}
	}
}

// grant records lease id with ttl (the TTL was validated by the proposer).
func (w *writeTxn) grant(id, ttl int64) error {
	l := w.s.lessor
	l.mu.Lock()
	defer l.mu.Unlock()
	if id == 0 {
		return ErrLeaseNotFound
	}
	if l.leases[id] != nil {
		return ErrLeaseExists
	}
	expiry := w.s.opts.Now().Add(time.Duration(ttl) * time.Second)
	_ = w.b.Set(leaseKey(id), encodeLease(ttl, expiry), nil)
	l.leases[id] = &lease{id: id, ttl: ttl, expiry: expiry, keys: map[string]struct{}{}}
	return nil
}

// LeaseRevoke revokes a lease and deletes its keys, in one revision, and
// returns the store's revision right after that apply (etcd's response
// revision: raised only if the lease had keys).
func (s *Store) LeaseRevoke(ctx context.Context, id int64) (int64, error) {
	resp, err := s.submit(ctx, &pb.InternalRaftRequest{LeaseRevoke: &pb.LeaseRevokeRequest{ID: id}})
	if err != nil {
		return 0, err
	}
	return resp.(int64), nil
}

func (w *writeTxn) revoke(id int64) error {
	l := w.s.lessor
	l.mu.Lock()
	ls := l.leases[id]
	var keys []string
	if ls != nil {
		for k := range ls.keys {
			keys = append(keys, k)
		}
	}
	l.mu.Unlock()
	if ls == nil {
		return ErrLeaseNotFound
	}
	sort.Strings(keys)
	for _, k := range keys {
		if prev := w.liveMeta([]byte(k)); prev != nil && prev.Lease == id {
			w.del(prev)
		}
	}
	_ = w.b.Delete(leaseKey(id), nil)
	l.mu.Lock()
	delete(l.leases, id)
	l.mu.Unlock()
	return nil
}

// LeaseKeepAlive renews a lease for its full TTL and returns the TTL. On a
// replicated member, the leader (which alone expires leases) renews it in
// memory; a follower passes the renewal to the leader through the log, as a
// checkpoint of the full TTL that every member applies.
func (s *Store) LeaseKeepAlive(ctx context.Context, id int64) (int64, error) {
	l := s.lessor
	if p := s.proposer.Load(); p != nil {
		l.mu.Lock()
		ls := l.leases[id]
		l.mu.Unlock()
		if ls == nil {
			return 0, ErrLeaseNotFound
		}
		if (*p).IsLeader() {
			return ls.ttl, l.renew(id, ls.ttl)
		}
		cp := &pb.LeaseCheckpoint{ID: id, Remaining_TTL: ls.ttl}
		if _, err := s.submit(ctx, &pb.InternalRaftRequest{LeaseCheckpoint: &pb.LeaseCheckpointRequest{Checkpoints: []*pb.LeaseCheckpoint{cp}}}); err != nil {
			return 0, err
		}
		return ls.ttl, nil
	}
	l.mu.Lock()
	ls := l.leases[id]
	if ls == nil {
		l.mu.Unlock()
		return 0, ErrLeaseNotFound
	}
	ls.expiry = s.opts.Now().Add(time.Duration(ls.ttl) * time.Second)
	ttl, rec := ls.ttl, encodeLease(ls.ttl, ls.expiry)
	// Held across the write so a concurrent revoke cannot be undone by it.
	// Not synced: after a crash the lease keeps the expiry last synced, which
	// is at most one TTL early, never late.
	defer l.mu.Unlock()
	if err := s.db.Set(leaseKey(id), rec, pebble.NoSync); err != nil {
		return 0, fmt.Errorf("persist lease %x: %w", id, err)
	}
	return ttl, nil
}

// renew sets the expiry of lease id to now + ttl seconds, in memory.
func (l *lessor) renew(id, ttl int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls := l.leases[id]
	if ls == nil {
		return ErrLeaseNotFound
	}
	ls.expiry = l.s.opts.Now().Add(time.Duration(ttl) * time.Second)
	return nil
}

// PromoteLeases gives every lease its full TTL again, from now plus extend.
// A member that becomes leader calls it before it expires anything, as
// etcd's lessor does: a lease never expires because of an election.
func (s *Store) PromoteLeases(extend time.Duration) {
	l := s.lessor
	l.mu.Lock()
	defer l.mu.Unlock()
	now := s.opts.Now()
	for _, ls := range l.leases {
		ls.expiry = now.Add(extend + time.Duration(ls.ttl)*time.Second)
	}
}

// LeaseTimeToLive describes a lease; keys are listed when asked.
func (s *Store) LeaseTimeToLive(id int64, withKeys bool) (*Lease, error) {
	l := s.lessor
	l.mu.Lock()
	defer l.mu.Unlock()
	ls := l.leases[id]
	if ls == nil {
		return nil, ErrLeaseNotFound
	}
	out := &Lease{ID: id, GrantedTTL: ls.ttl, Remaining: max(ls.expiry.Sub(s.opts.Now()), 0)}
	if withKeys {
		for k := range ls.keys {
			out.Keys = append(out.Keys, []byte(k))
		}
		sort.Slice(out.Keys, func(i, j int) bool { return string(out.Keys[i]) < string(out.Keys[j]) })
	}
	return out, nil
}

// Leases lists the IDs of the granted leases.
func (s *Store) Leases() []int64 {
	l := s.lessor
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]int64, 0, len(l.leases))
	for id := range l.leases {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// expiryLoop revokes expired leases, checking every 100 ms.
func (l *lessor) expiryLoop() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-l.s.stopc:
			return
		case <-t.C:
		}
		now := l.s.opts.Now()
		var expired []int64
		l.mu.Lock()
		for id, ls := range l.leases {
			if !ls.expiry.After(now) {
				expired = append(expired, id)
			}
		}
		l.mu.Unlock()
		for _, id := range expired {
			if err := l.expire(id); err != nil && err != ErrClosed {
				l.s.log.Warn("revoke expired lease", "lease", fmt.Sprintf("%x", id), "err", err)
			}
		}
	}
}

// expire revokes lease id if it is still expired. A replicated member that
// does not lead leaves expiry to the leader.
func (l *lessor) expire(id int64) error {
	if l.s.ext.holdLeases.Load() {
		return nil // the mode holds expiry: the leases belong to another cluster
	}
	if l.s.opts.Replicated && l.s.proposer.Load() == nil {
		return nil // not serving yet
	}
	if p := l.s.proposer.Load(); p != nil {
		if !(*p).IsLeader() {
			return nil
		}
		_, err := l.s.submit(context.Background(), &pb.InternalRaftRequest{LeaseRevoke: &pb.LeaseRevokeRequest{ID: id}})
		if errors.Is(err, ErrLeaseNotFound) {
			return nil
		}
		return err
	}
	_, err := l.s.write(context.Background(), func(w *writeTxn) (any, error) {
		l.mu.Lock()
		ls := l.leases[id]
		stillExpired := ls != nil && !ls.expiry.After(l.s.opts.Now())
		l.mu.Unlock()
		if !stillExpired {
			return nil, nil // renewed or revoked meanwhile
		}
		return nil, w.revoke(id)
	})
	return err
}
