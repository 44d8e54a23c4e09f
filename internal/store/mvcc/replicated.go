package mvcc

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"google.golang.org/protobuf/proto"
)

// Keys of a replicated member's state, written in the same batches as the
// entries they account for (see ApplyEntries).
var (
	// metaApplied holds the raft index and term of the last applied entry
	// (etcd's consistent index): a restart replays the log after it only.
	metaApplied = []byte("m/applied")
	// metaConfState holds raft's ConfState (marshalled by the caller) as of
	// the applied index, sent with state snapshots.
	metaConfState = []byte("m/confstate")
	// metaRestoring marks a state snapshot being installed: the store's data
	// is incomplete until the snapshot is installed again.
	metaRestoring = []byte("m/restoring")
)

const prefixCluster = 'c'

// memberKey is the pebble key of a cluster member's record (pb.Member).
func memberKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixCluster, 'm'}, id)
}

// removedKey marks a member id as removed for good.
func removedKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixCluster, 'r'}, id)
}

// AppliedIndex is the position of the state machine in the raft log.
type AppliedIndex struct {
	Index, Term uint64
}

// Entry is one committed raft entry as the state machine applies it.
type Entry struct {
	Index, Term uint64
	// Request is a normal entry's request; nil for an empty entry (a new
	// leader's) and for conf changes.
	Request *pb.InternalRaftRequest
	// Conf is set for a conf change.
	Conf *ConfUpdate
	// Extension is set for one of the store's own entries (extension.go).
	Extension *Extension
}

// ConfUpdate is the state-machine side of an applied conf change.
type ConfUpdate struct {
	// Put adds, promotes or updates a member.
	Put *pb.Member
	// Remove removes a member (its id can never return).
	Remove uint64
	// ConfState is raft's configuration after the change, marshalled.
	ConfState []byte
	// Err refuses the change (raft applied it as a no-op); it is the result.
	Err error
}

// Result is what applying one entry returned.
type Result struct {
	Resp any
	Err  error
}

func (s *Store) loadApplied(r pebble.Reader) error {
	if err := s.loadRemoved(); err != nil {
		return err
	}
	if err := s.loadMode(); err != nil {
		return err
	}
	v, err := s.get(r, metaApplied)
	if err != nil || v == nil {
		s.applied = AppliedIndex{}
		return err
	}
	if len(v) != 16 {
		return fmt.Errorf("malformed %s in data dir %s; the data dir is damaged", metaApplied, s.dir)
	}
	s.applied = AppliedIndex{Index: binary.BigEndian.Uint64(v), Term: binary.BigEndian.Uint64(v[8:])}
	return nil
}

// Applied returns the raft index and term of the last applied entry.
func (s *Store) Applied() AppliedIndex {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return s.applied
}

// Restoring reports whether an interrupted state snapshot install left the
// data incomplete (the replica installs the snapshot again before serving).
func (s *Store) Restoring() (bool, error) {
	v, err := s.get(s.db, metaRestoring)
	return v != nil, err
}

// ConfState returns the marshalled raft ConfState kept with the applied index.
func (s *Store) ConfState() ([]byte, error) { return s.get(s.db, metaConfState) }

// Members returns the cluster members recorded in the state machine, in id order.
func (s *Store) Members() ([]*pb.Member, error) {
	var out []*pb.Member
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixCluster, 'm'}, UpperBound: []byte{prefixCluster, 'm' + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		m := &pb.Member{}
		if err := proto.Unmarshal(it.Value(), m); err != nil {
			return nil, fmt.Errorf("decode member %x: %w; the data dir is damaged", it.Key()[2:], err)
		}
		out = append(out, m)
	}
	return out, it.Error()
}

// IsRemoved reports whether member id was removed from the cluster (asked
// for every raft message received: answered from memory).
func (s *Store) IsRemoved(id uint64) bool {
	_, ok := s.removed.Load(id)
	return ok
}

// loadRemoved loads the removed member ids into memory.
func (s *Store) loadRemoved() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixCluster, 'r'}, UpperBound: []byte{prefixCluster, 'r' + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	s.removed.Clear()
	for ok := it.First(); ok; ok = it.Next() {
		if k := it.Key(); len(k) == 10 {
			s.removed.Store(binary.BigEndian.Uint64(k[2:]), struct{}{})
		}
	}
	return it.Error()
}

// Bootstrap records the first members and the applied position of a new
// replicated member (a raft snapshot at index, term), keeping whatever data
// the store holds: a single store's data dir becomes the first member of a
// cluster this way.
func (s *Store) Bootstrap(at AppliedIndex, members []*pb.Member, confState []byte) error {
	b := s.db.NewBatch()
	defer b.Close()
	for _, m := range members {
		v, err := proto.Marshal(m)
		if err != nil {
			return err
		}
		_ = b.Set(memberKey(m.ID), v, nil)
	}
	_ = b.Set(metaConfState, confState, nil)
	_ = b.Set(metaApplied, appliedValue(at), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("bootstrap member state: %w", err)
	}
	s.applyMu.Lock()
	s.applied = at
	s.applyMu.Unlock()
	return nil
}

func appliedValue(at AppliedIndex) []byte {
	v := binary.BigEndian.AppendUint64(nil, at.Index)
	return binary.BigEndian.AppendUint64(v, at.Term)
}

// ApplyEntries applies committed entries in order, in one batch that also
// records the last entry's index (m/applied): after a crash the store holds
// either all of them or none, and the log is replayed from m/applied. Entries
// at or below the applied index are skipped. The batch is not synced (the
// raft WAL holds the entries durably) unless the store was opened without
// Replicated. It returns one result per entry; an error means the engine
// failed and the member must stop.
func (s *Store) ApplyEntries(ents []Entry) ([]Result, error) {
	s.noteWrite()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if errp := s.failed.Load(); errp != nil {
		return nil, *errp
	}
	g := s.newGroup()
	results := make([]Result, len(ents))
	last := s.applied
	for i, e := range ents {
		if e.Index <= last.Index {
			results[i].Err = ErrClosed
			continue
		}
		last = AppliedIndex{Index: e.Index, Term: e.Term}
		g.w.begin()
		switch {
		case e.Request != nil:
			results[i].Resp, results[i].Err = g.w.applyRequest(e.Request)
		case e.Conf != nil:
			results[i].Err = g.w.applyConf(e.Conf)
		case e.Extension != nil:
			results[i].Resp, results[i].Err = g.w.applyExtension(e.Extension)
		}
		if g.w.changes > 0 {
			g.events = append(g.events, g.w.events...)
		}
	}
	if last == s.applied {
		return results, nil
	}
	_ = g.w.b.Set(metaApplied, appliedValue(last), nil)
	req := &writeRequest{done: make(chan struct{})}
	s.commitGroup(g, []*writeRequest{req})
	if req.err != nil {
		return nil, req.err
	}
	s.applied = last
	return results, nil
}

func (w *writeTxn) applyConf(c *ConfUpdate) error {
	if c.ConfState != nil {
		_ = w.b.Set(metaConfState, c.ConfState, nil)
	}
	if c.Err != nil {
		return c.Err
	}
	if c.Put != nil {
		v, err := proto.Marshal(c.Put)
		if err != nil {
			return err
		}
		_ = w.b.Set(memberKey(c.Put.ID), v, nil)
	}
	if c.Remove != 0 {
		_ = w.b.Delete(memberKey(c.Remove), nil)
		_ = w.b.Set(removedKey(c.Remove), []byte{1}, nil)
		id := c.Remove
		w.afterCommit = append(w.afterCommit, func() { w.s.removed.Store(id, struct{}{}) })
	}
	return nil
}

// setMemberAttrs records a member's name and client URLs (etcd publishes
// them through the log once a member has started).
func (w *writeTxn) setMemberAttrs(r *membershippb.ClusterMemberAttrSetRequest) error {
	v, err := w.s.get(w.b, memberKey(r.Member_ID))
	if err != nil || v == nil {
		return err // a removed member: nothing to update
	}
	m := &pb.Member{}
	if err := proto.Unmarshal(v, m); err != nil {
		return fmt.Errorf("decode member %x: %w", r.Member_ID, err)
	}
	if a := r.MemberAttributes; a != nil {
		m.Name, m.ClientURLs = a.Name, a.ClientUrls
	}
	nv, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	_ = w.b.Set(memberKey(m.ID), nv, nil)
	return nil
}
