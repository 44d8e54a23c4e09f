package hamove

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/staticpod"
	"github.com/quantyroot/quantykube/internal/install/storemove"
)

func (n *Node) joinPlan() *install.Plan {
	return &install.Plan{Op: StepJoin, Steps: []install.Step{
		{Name: "member-add", Impact: "none: this node's member is added to the store cluster as a learner (it does not count for quorum yet)",
			Do: n.memberAddDo, Undo: n.memberRemoveSelf},
		{Name: "start-member", Impact: "none: the quantykube-store unit starts and joins; it receives the whole state from the leader",
			Do: n.startJoiningDo, Undo: n.removeDataDir},
		{Name: "promote", Impact: "none: the member becomes a voter once it is in sync with the leader (quorum grows by one)",
			Do: n.promoteDo, Undo: n.memberRemoveSelf},
		{Name: "level", Impact: "none: waits until the member serves as a mirror and has applied etcd's current revision",
			Do: func(ctx context.Context) error {
				if err := n.waitMirror(ctx); err != nil {
					return err
				}
				return n.waitLevel(ctx)
			}},
	}}
}

func (n *Node) joinPreflight(ctx context.Context) error {
	ms, err := n.checkControlPlane(ctx)
	if err != nil {
		return err
	}
	sms, ok, err := n.storeMembers(ctx, ms)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no store member answers on %s: run `quantykube install store --ha %s` on the first control-plane node first", strings.Join(n.storeURLs(ms), ","), StepFirst)
	}
	for _, m := range sms {
		if m.PeerURL == n.facts.PeerURL(n.Paths) {
			return fmt.Errorf("this node is a store member already (%s, id %x): nothing to join; if it is broken, remove it with etcdctl member remove and rerun", m.Name, m.ID)
		}
		if !m.Started {
			return fmt.Errorf("store member %x (%s) was added but never started: finish that node's join first (rerun `quantykube install store --ha %s` there)", m.ID, m.PeerURL, StepJoin)
		}
	}
	return n.checkFreshMember()
}

// storeClient is a client of every store member that may answer.
func (n *Node) storeClient(ctx context.Context) (*clientv3.Client, error) {
	ms, err := n.etcdMembers(ctx)
	if err != nil {
		return nil, err
	}
	return n.dial(append([]string{n.Paths.LocalURL()}, n.storeURLs(ms)...)...)
}

// memberAddTimeout bounds the retries of a member add the store refuses for
// now (a member that joined a moment ago is not yet counted as started).
const memberAddTimeout = time.Minute

func (n *Node) memberAddDo(ctx context.Context) error {
	c, err := n.storeClient(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	peer := n.facts.PeerURL(n.Paths)
	var ic []string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, memberAddTimeout, true, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		list, err := c.MemberList(cctx)
		if err != nil {
			n.Log.Info("member list", "err", err)
			return false, nil
		}
		members := list.Members
		if !hasPeer(list.Members, peer) {
			resp, err := c.MemberAddAsLearner(cctx, []string{peer})
			if err != nil {
				if strings.Contains(err.Error(), "unhealthy cluster") || strings.Contains(err.Error(), "not enough started") {
					n.Log.Info("member add refused for now", "err", err)
					return false, nil
				}
				return false, fmt.Errorf("member add %s: %w", peer, err)
			}
			members = resp.Members
		}
		ic = ic[:0]
		for _, m := range members {
			name := m.Name
			if len(m.PeerURLs) > 0 && m.PeerURLs[0] == peer {
				name = n.facts.Name
			}
			ic = append(ic, name+"="+m.PeerURLs[0])
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(n.Out, "  store members: %s\n", strings.Join(ic, ","))
	return staticpod.WriteAtomic(n.Paths.initialClusterFile(StepJoin), []byte(strings.Join(ic, ",")), 0o600)
}

func hasPeer(ms []*etcdserverpb.Member, peer string) bool {
	for _, m := range ms {
		if len(m.PeerURLs) > 0 && m.PeerURLs[0] == peer {
			return true
		}
	}
	return false
}

// memberRemoveSelf removes this node's member from the store (by its peer
// URL), if it is there. A learner is removed whether it runs or not; a
// voter is removed while it still runs (the undo of promote comes before
// the unit's), so a cluster of two keeps the quorum the remove needs.
func (n *Node) memberRemoveSelf(ctx context.Context) error {
	ms, err := n.etcdMembers(ctx)
	if err != nil {
		return err
	}
	c, err := n.dial(n.storeURLs(ms)...)
	if err != nil {
		return err
	}
	defer c.Close()
	return n.removeOwnMember(ctx, c)
}

// startJoiningDo starts the unit of a member that joins as a learner (it
// serves nothing until promoted).
func (n *Node) startJoiningDo(ctx context.Context) error {
	ic, err := os.ReadFile(n.Paths.initialClusterFile(StepJoin))
	if err != nil {
		return fmt.Errorf("read the recorded --initial-cluster: %w", err)
	}
	if !n.BinaryGiven {
		if err := storemove.InstallBinary(n.Paths.Binary); err != nil {
			return err
		}
	}
	return n.Units.Install(ctx, n.memberUnit(strings.TrimSpace(string(ic)), "existing"))
}

// promoteTimeout bounds the wait for a learner to be in sync (it receives
// the whole state first).
const promoteTimeout = 3 * time.Minute

// promoteDo promotes this node's learner once the leader finds it in sync.
func (n *Node) promoteDo(ctx context.Context) error {
	c, err := n.storeClient(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	peer := n.facts.PeerURL(n.Paths)
	var last error
	t0 := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, promoteTimeout, true, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		list, err := c.MemberList(cctx)
		if last = err; err != nil {
			return false, nil
		}
		for _, m := range list.Members {
			if len(m.PeerURLs) == 0 || m.PeerURLs[0] != peer {
				continue
			}
			if !m.IsLearner {
				return true, nil
			}
			if _, err := c.MemberPromote(cctx, m.ID); err != nil {
				last = err
				return false, nil
			}
			return true, nil
		}
		return false, fmt.Errorf("this node's member (%s) is not in the store's member list", peer)
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("the learner was not promoted within %v: %v (see journalctl -u %s)", promoteTimeout, last, n.Paths.Unit)
	}
	if err == nil {
		fmt.Fprintf(n.Out, "  promoted to a voter after %v\n", time.Since(t0).Round(time.Millisecond))
	}
	return err
}
