package mirror

import "context"

// Member is the replication the controller runs on: package replica for a
// cluster member, Single for a store without peers.
type Member interface {
	// ID is the member's id (etcd's).
	ID() uint64
	IsLeader() bool
	// Leader is the leader's id, 0 if none is known.
	Leader() uint64
	// LeaderChanged is closed at the next change of leader.
	LeaderChanged() <-chan struct{}
	// ReadBarrier returns once the local state has applied everything
	// committed before the call.
	ReadBarrier(ctx context.Context) error
}

// Single is a store without peers: its own leader, forever.
type Single struct{ MemberID uint64 }

func (s Single) ID() uint64                        { return s.MemberID }
func (s Single) IsLeader() bool                    { return true }
func (s Single) Leader() uint64                    { return s.MemberID }
func (s Single) LeaderChanged() <-chan struct{}    { return nil }
func (s Single) ReadBarrier(context.Context) error { return nil }
