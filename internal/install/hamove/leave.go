package hamove

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

func (n *Node) leavePlan() *install.Plan {
	return &install.Plan{Op: StepLeave, Steps: []install.Step{
		{Name: "member-remove", Impact: "none: this node's member leaves the store cluster (the last one stays a cluster of one)",
			Do: n.leaveDo},
		{Name: "stop-member", Impact: "none: the quantykube-store unit stops and is removed; its data dir is set aside (kept) for inspection",
			Do: n.stopMemberDo},
	}}
}

func (n *Node) leavePreflight(ctx context.Context) error {
	if err := n.apiserverOn(n.Paths.localEtcd(), "it is on the store: run `quantykube undo store --ha "+StepSwitchBack+"` here first"); err != nil {
		return err
	}
	st, err := n.mirrorStatus(ctx)
	if err != nil {
		if gone, gerr := n.memberGone(ctx); gerr == nil && gone {
			return nil // removed already (an interrupted leave): only its unit is left
		}
		return fmt.Errorf("%v: is this node's member stopped already?", err)
	}
	if st.Mode != api.Mirror {
		return fmt.Errorf("the store is in mode %s: its members leave only once it mirrors etcd again (`quantykube undo store --ha %s`)", st.Mode, StepCutback)
	}
	return nil
}

// leaveDo removes this node's member through the others while it still
// runs (a cluster of two keeps its quorum that way), unless it is the last.
func (n *Node) leaveDo(ctx context.Context) error {
	c, err := n.storeClient(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return n.removeOwnMember(ctx, c)
}

// memberGone reports whether the other members no longer list this node's.
func (n *Node) memberGone(ctx context.Context) (bool, error) {
	ms, err := n.etcdMembers(ctx)
	if err != nil {
		return false, err
	}
	sms, ok, err := n.storeMembers(ctx, ms)
	if err != nil || !ok {
		return false, err
	}
	for _, m := range sms {
		if m.PeerURL == n.facts.PeerURL(n.Paths) {
			return false, nil
		}
	}
	return true, nil
}

// stopMemberDo removes the unit and sets the data dir aside (a later move
// starts from an empty one).
func (n *Node) stopMemberDo(ctx context.Context) error {
	if err := n.removeMember(ctx); err != nil {
		return err
	}
	aside := fmt.Sprintf("%s.left-%s", n.Paths.DataDir, time.Now().UTC().Format("20060102T150405Z"))
	if err := os.Rename(n.Paths.DataDir, aside); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("set the store's data dir aside: %w", err)
	} else if err == nil {
		fmt.Fprintf(n.Out, "  the member's data is kept in %s\n", aside)
	}
	return nil
}

// removeOwnMember removes this node's store member through c, retried
// until the cluster answers; the last member is left (it stops with its
// data kept), and one already gone is fine.
func (n *Node) removeOwnMember(ctx context.Context, c *clientv3.Client) error {
	peer := n.facts.PeerURL(n.Paths)
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, memberAddTimeout, true, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		list, err := c.MemberList(cctx)
		if err != nil {
			return false, nil
		}
		if len(list.Members) == 1 {
			if len(list.Members[0].PeerURLs) > 0 && list.Members[0].PeerURLs[0] == peer {
				fmt.Fprintf(n.Out, "  the last store member: it stops with its data kept\n")
			}
			return true, nil
		}
		for _, m := range list.Members {
			if len(m.PeerURLs) > 0 && m.PeerURLs[0] == peer {
				if _, err := c.MemberRemove(cctx, m.ID); err != nil {
					n.Log.Info("member remove", "id", m.ID, "err", err)
					return false, nil
				}
				fmt.Fprintf(n.Out, "  store member %s (%x) removed; %d remain\n", n.facts.Name, m.ID, len(list.Members)-1)
			}
		}
		return true, nil
	})
}
