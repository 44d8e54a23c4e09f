package mvcc

import (
	"context"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// laterPutProposer applies each proposed request together with a put that
// follows it in the log (one raft Ready holding both, as under load), and
// returns the proposed request's own result.
type laterPutProposer struct {
	s     *Store
	index uint64
}

func (p *laterPutProposer) Propose(_ context.Context, req *pb.InternalRaftRequest) (any, error) {
	p.index += 2
	res, err := p.s.ApplyEntries([]Entry{
		{Index: p.index - 1, Term: 1, Request: req},
		{Index: p.index, Term: 1, Request: &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte("later"), Value: []byte("x")}}},
	})
	if err != nil {
		return nil, err
	}
	return res[0].Resp, res[0].Err
}

func (p *laterPutProposer) IsLeader() bool { return true }

// TestLeaseResponseRevisions: a grant's and a revoke's revision is the
// store's at their apply, as etcd answers — not a later one (a later entry
// applied before the proposer wakes must not leak into the response: etcd's
// linearizability checker compares these revisions).
func TestLeaseResponseRevisions(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoSync: true, Replicated: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	p := &laterPutProposer{s: s}
	s.SetProposer(p)
	ctx := context.Background()

	id, _, rev, err := s.LeaseGrantRev(ctx, 0, 60)
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	if rev != 1 || s.Rev() != 2 {
		t.Fatalf("grant answered revision %d (store now at %d), want 1: the revision at its apply", rev, s.Rev())
	}
	if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v"), Lease: id}); err != nil {
		t.Fatalf("put with lease: %v", err)
	}
	before := s.Rev() // 4: put k at 3, "later" at 4
	rev, err = s.LeaseRevoke(ctx, id)
	if err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if rev != before+1 {
		t.Fatalf("revoke of a lease with a key answered revision %d, want %d (its delete), store at %d", rev, before+1, s.Rev())
	}
	id2, _, _, err := s.LeaseGrantRev(ctx, 0, 60)
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	before = s.Rev()
	if rev, err = s.LeaseRevoke(ctx, id2); err != nil || rev != before {
		t.Fatalf("revoke of a lease without keys = %d, %v; want %d (no new revision)", rev, err, before)
	}
}
