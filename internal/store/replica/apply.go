package replica

import (
	"encoding/json"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

func marshalRequest(req *pb.InternalRaftRequest) ([]byte, error) {
	data, err := proto.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return data, nil
}

// waitID is how the proposer of an entry waits for its apply: the request
// header's id for a normal entry, the conf change's id otherwise.
type pending struct {
	id     uint64
	conf   bool       // a conf change: answered after Advance
	member *pb.Member // a conf change's member, for the transport
	remove uint64
}

// confAnswer is a conf change's result waiting for Advance.
type confAnswer struct {
	id     uint64
	result mvcc.Result
}

// apply decodes committed entries and applies them to the store in one
// batch, then answers the members that proposed them.
func (r *Replica) apply(committed []*raftpb.Entry) error {
	if len(committed) == 0 {
		return nil
	}
	defer func() { r.delivered = committed[len(committed)-1].GetIndex() }()
	ents := make([]mvcc.Entry, 0, len(committed))
	waits := make([]pending, 0, len(committed))
	storeApplied := r.store.Applied().Index
	for _, e := range committed {
		if e.GetIndex() <= storeApplied {
			// Replayed after a restart: the store holds it already; raft
			// still needs the conf changes it replays.
			r.replayConf(e)
			continue
		}
		me := mvcc.Entry{Index: e.GetIndex(), Term: e.GetTerm()}
		var p pending
		switch e.GetType() {
		case raftpb.EntryNormal:
			if id, x, ok, err := mvcc.DecodeExtension(e.GetData()); ok {
				if err != nil {
					return fmt.Errorf("decode raft entry %d: %w (the log is damaged)", e.GetIndex(), err)
				}
				me.Extension, p.id = x, id
			} else if len(e.GetData()) > 0 {
				req := &pb.InternalRaftRequest{}
				if err := proto.Unmarshal(e.GetData(), req); err != nil {
					return fmt.Errorf("decode raft entry %d: %w (the log is damaged)", e.GetIndex(), err)
				}
				me.Request, p.id = req, req.GetHeader().GetID()
			}
		case raftpb.EntryConfChange:
			cc := &raftpb.ConfChange{}
			if err := proto.Unmarshal(e.GetData(), cc); err != nil {
				return fmt.Errorf("decode conf change %d: %w (the log is damaged)", e.GetIndex(), err)
			}
			me.Conf, p = r.confUpdate(cc, e.GetIndex())
		}
		ents = append(ents, me)
		waits = append(waits, p)
	}
	if len(ents) == 0 {
		return nil
	}
	results, err := r.store.ApplyEntries(ents)
	if err != nil {
		return fmt.Errorf("apply raft entries to the store in %s: %w (is the disk full? free space and restart this member; the others keep serving)", r.cfg.DataDir, err)
	}
	last := committed[len(committed)-1].GetIndex()
	r.applied.Store(last)
	for i, p := range waits {
		r.afterConf(p)
		switch {
		case p.id == 0:
		case p.conf:
			r.confAnswers = append(r.confAnswers, confAnswer{p.id, results[i]})
		default:
			r.waits.Trigger(p.id, results[i])
		}
	}
	r.applyWait.Trigger(last)
	return nil
}

// answerConfChanges answers the proposers of the conf changes applied
// before the last Advance. Raft drops a conf change proposed while one it
// has not yet seen applied is pending (the leader replaces it with an empty
// entry, and its proposer times out): answering before Advance let a
// proposer's next change — a member added again right after its remove, a
// promotion right after an add — race raft's applied index (CI, 6
// December: TestAddAgainRightAfterRemove, "etcdserver: request timed
// out"). Advance hands raft the applied index in its own goroutine before
// it takes any later proposal.
func (r *Replica) answerConfChanges() {
	for _, a := range r.confAnswers {
		r.waits.Trigger(a.id, a.result)
	}
	clear(r.confAnswers)
	r.confAnswers = r.confAnswers[:0]
}

// replayConf applies a replayed conf change to raft as it was applied the
// first time (the store's members already reflect it).
func (r *Replica) replayConf(e *raftpb.Entry) {
	if e.GetType() != raftpb.EntryConfChange {
		return
	}
	cc := &raftpb.ConfChange{}
	if err := proto.Unmarshal(e.GetData(), cc); err == nil {
		r.confState = r.node.ApplyConfChange(cc)
	}
}

// confUpdate validates a committed conf change against the members the
// store holds, applies it to raft (a refused one as a no-op, as etcd does)
// and returns the store's side of it.
func (r *Replica) confUpdate(cc *raftpb.ConfChange, index uint64) (*mvcc.ConfUpdate, pending) {
	p := pending{id: cc.GetId(), conf: true}
	u := &mvcc.ConfUpdate{}
	m, err := r.checkConf(cc)
	if err != nil {
		r.log.Warn("refused a conf change", "index", index, "err", err)
		cc.NodeId = proto.Uint64(raft.None)
		u.Err = err
	} else {
		switch cc.GetType() {
		case raftpb.ConfChangeRemoveNode:
			u.Remove, p.remove = cc.GetNodeId(), cc.GetNodeId()
		default:
			u.Put, p.member = m, m
		}
	}
	// r.confState follows every applied conf change (etcd's apply loop
	// does the same): the next raft snapshot records it, and a member that
	// restarts from that snapshot gets its voters from it.
	r.confState = r.node.ApplyConfChange(cc)
	u.ConfState, _ = proto.Marshal(r.confState)
	if cc.GetNodeId() == r.id && cc.GetType() != raftpb.ConfChangeRemoveNode && m != nil {
		r.isLearner.Store(m.IsLearner)
	}
	return u, p
}

// checkConf validates a conf change and returns the member record it puts.
func (r *Replica) checkConf(cc *raftpb.ConfChange) (*pb.Member, error) {
	id := cc.GetNodeId()
	if r.store.IsRemoved(id) {
		return nil, rpctypes.ErrGRPCMemberNotFound
	}
	cur := r.member(id)
	if cc.GetType() == raftpb.ConfChangeRemoveNode {
		if cur == nil {
			return nil, rpctypes.ErrGRPCMemberNotFound
		}
		return nil, nil
	}
	var jm membership.Member
	if err := json.Unmarshal(cc.GetContext(), &jm); err != nil {
		return nil, fmt.Errorf("conf change %d: bad member: %w", cc.GetId(), err)
	}
	m := &pb.Member{ID: uint64(jm.ID), Name: jm.Name, PeerURLs: jm.PeerURLs, ClientURLs: jm.ClientURLs, IsLearner: jm.IsLearner}
	switch cc.GetType() {
	case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
		if cur != nil && !(cur.IsLearner && !m.IsLearner) {
			return nil, rpctypes.ErrGRPCMemberExist
		}
		if cur != nil { // promotion keeps the learner's published attributes
			m.Name, m.ClientURLs, m.PeerURLs = cur.Name, cur.ClientURLs, cur.PeerURLs
		}
	case raftpb.ConfChangeUpdateNode:
		if cur == nil {
			return nil, rpctypes.ErrGRPCMemberNotFound
		}
		m.Name, m.ClientURLs, m.IsLearner = cur.Name, cur.ClientURLs, cur.IsLearner
	}
	return m, nil
}

func (r *Replica) member(id uint64) *pb.Member {
	ms, _ := r.store.Members()
	for _, m := range ms {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// afterConf updates the transport after an applied conf change; a member
// removed from the cluster stops.
func (r *Replica) afterConf(p pending) {
	switch {
	case p.remove == r.id:
		r.fail(fmt.Errorf("this member (%s) was removed from the cluster; its data dir %s cannot rejoin: add a new member with an empty data dir", types.ID(r.id), r.cfg.DataDir))
	case p.remove != 0:
		if r.peers[types.ID(p.remove)] {
			r.transport.RemovePeer(types.ID(p.remove))
			delete(r.peers, types.ID(p.remove))
		}
	case p.member != nil && p.member.ID != r.id:
		id := types.ID(p.member.ID)
		if !r.peers[id] {
			r.transport.AddPeer(id, p.member.PeerURLs)
			r.peers[id] = true
		} else {
			r.transport.UpdatePeer(id, p.member.PeerURLs)
		}
	}
}
