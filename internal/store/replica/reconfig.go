package replica

import (
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
)

// healthInterval is etcd's HealthInterval: a peer counts as connected for
// --strict-reconfig-check once its stream has been up for this long.
const healthInterval = 5 * time.Second

// The checks of --strict-reconfig-check (etcd's default), with etcd's rules
// and errors: a member change is refused when it would leave fewer started
// (published) voters than a quorum (ErrGRPCMemberNotEnoughStarted), or when
// this member is not connected to enough voters for the new configuration
// to keep an active quorum (ErrGRPCUnhealthy).

// mayAddMember is etcd's mayAddMember.
func (r *Replica) mayAddMember(learner bool) error {
	if !r.cfg.StrictReconfigCheck {
		return nil
	}
	voters, err := r.voters()
	if err != nil {
		return err
	}
	if !learner {
		n, started := len(voters)+1, startedCount(voters)
		if !(started == 1 && n == 2) && started < n/2+1 {
			return rpctypes.ErrGRPCMemberNotEnoughStarted
		}
	}
	if len(voters) > 1 && r.connectedCount(voters) < (len(voters)+1)/2+1 {
		return rpctypes.ErrGRPCUnhealthy
	}
	return nil
}

// mayRemoveMember is etcd's mayRemoveMember: removing a learner or a member
// this one is not connected to (a dead one) never breaks the active quorum.
func (r *Replica) mayRemoveMember(id uint64) error {
	if !r.cfg.StrictReconfigCheck {
		return nil
	}
	if m := r.member(id); m != nil && m.IsLearner {
		return nil
	}
	voters, err := r.voters()
	if err != nil {
		return err
	}
	var rest []*pb.Member
	for _, m := range voters {
		if m.ID != id {
			rest = append(rest, m)
		}
	}
	if startedCount(rest) < len(rest)/2+1 {
		return rpctypes.ErrGRPCMemberNotEnoughStarted
	}
	if id != r.id && r.transport.ActiveSince(types.ID(id)).IsZero() {
		return nil
	}
	if r.connectedCount(voters)-1 < 1+(len(voters)-1)/2 {
		return rpctypes.ErrGRPCUnhealthy
	}
	return nil
}

// mayPromoteMember is etcd's check after the learner is known to be ready:
// the promoted learner counts as started.
func (r *Replica) mayPromoteMember() error {
	if !r.cfg.StrictReconfigCheck {
		return nil
	}
	voters, err := r.voters()
	if err != nil {
		return err
	}
	if n, started := len(voters)+1, startedCount(voters)+1; started < n/2+1 {
		return rpctypes.ErrGRPCMemberNotEnoughStarted
	}
	return nil
}

func (r *Replica) voters() ([]*pb.Member, error) {
	ms, err := r.store.Members()
	if err != nil {
		return nil, err
	}
	var out []*pb.Member
	for _, m := range ms {
		if !m.IsLearner {
			out = append(out, m)
		}
	}
	return out, nil
}

// startedCount counts the members that have published a name (etcd's
// Member.IsStarted).
func startedCount(ms []*pb.Member) int {
	n := 0
	for _, m := range ms {
		if m.Name != "" {
			n++
		}
	}
	return n
}

// connectedCount counts this member and the members its transport has been
// connected to for healthInterval (etcd's numConnectedSince).
func (r *Replica) connectedCount(ms []*pb.Member) int {
	since := time.Now().Add(-healthInterval)
	n := 0
	for _, m := range ms {
		if m.ID == r.id {
			n++
			continue
		}
		if t := r.transport.ActiveSince(types.ID(m.ID)); !t.IsZero() && t.Before(since) {
			n++
		}
	}
	return n
}
