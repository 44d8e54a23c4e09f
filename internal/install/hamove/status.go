package hamove

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"

	"github.com/quantyroot/quantykube/internal/install/etcdrestore"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

// Status is where an HA move stands, as seen from one control-plane node:
// etcd's members, the store's members and mode, each API server's datastore.
type Status struct {
	// Nodes are the control-plane nodes (etcd's members), by name: the
	// first one runs first, cutover, replay-to and cutback.
	Nodes []NodeStatus `json:"nodes"`
	// StoreMode is the store's mode ("" when no store member answers).
	StoreMode api.Mode `json:"storeMode,omitempty"`
	// Lag is the replay's lag (mirror: behind etcd; replaying-to: etcd behind).
	Lag    int64  `json:"lag"`
	Failed string `json:"failed,omitempty"`
	// Phase sums it up in a few words.
	Phase string `json:"phase"`
	// Next is the next node step in the direction asked for (nil: there).
	Next *NodeStep `json:"next,omitempty"`
}

// NodeStatus is one control-plane node.
type NodeStatus struct {
	Name string `json:"name"`
	// Etcd reports whether its etcd member listens.
	Etcd bool `json:"etcd"`
	// Member reports whether it has a started store member.
	Member bool `json:"member"`
	// APIServer is its API server's --etcd-servers ("" if none runs).
	APIServer string `json:"apiserver"`
}

// Status reads where the move stands and, for the direction undo says,
// the next node step; it changes nothing.
func (n *Node) Status(ctx context.Context, undo bool) (*Status, error) {
	n.defaults()
	var err error
	if n.facts, err = n.Paths.loadFacts(); err != nil {
		return nil, err
	}
	ms, err := n.etcdMembers(ctx)
	if err != nil {
		return nil, err
	}
	ms = append([]EtcdMember(nil), ms...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	s := &Status{}
	sms, haveStore, err := n.storeMembers(ctx, ms)
	if err != nil {
		return nil, err
	}
	if haveStore {
		if st, err := n.anyMirrorStatus(ctx, ms); err == nil {
			s.StoreMode, s.Lag, s.Failed = st.Mode, st.Lag, st.Failed
		}
	}
	on, err := n.APIServers(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		u, _ := url.Parse(m.ClientURL)
		ns := NodeStatus{Name: m.Name, Etcd: etcdrestore.Listening(u.Host), APIServer: on[m.Name]}
		peer := "https://" + m.Host() + ":" + n.Paths.PeerPort
		for _, sm := range sms {
			ns.Member = ns.Member || (sm.PeerURL == peer && sm.Started)
		}
		s.Nodes = append(s.Nodes, ns)
	}
	s.Phase, s.Next = s.next(n.Paths.OnStore, undo)
	return s, nil
}

// anyMirrorStatus asks the local member, else any member, for its status.
func (n *Node) anyMirrorStatus(ctx context.Context, ms []EtcdMember) (*api.Status, error) {
	if st, err := n.mirrorStatus(ctx); err == nil {
		return st, nil
	}
	var last error
	for _, u := range n.storeURLs(ms) {
		st, err := n.mirrorStatusAt(ctx, u)
		if err == nil {
			return st, nil
		}
		last = err
	}
	return nil, last
}

// next derives the phase and the next step from what is observed; the
// steps' own preflights make the same checks, so a stale answer is refused.
func (s *Status) next(onStore func(string) bool, undo bool) (string, *NodeStep) {
	var names []string
	nStore, members, etcds := 0, 0, 0
	for _, ns := range s.Nodes {
		names = append(names, ns.Name)
		if onStore(ns.APIServer) {
			nStore++
		}
		if ns.Member {
			members++
		}
		if ns.Etcd {
			etcds++
		}
	}
	first := func(f func(NodeStatus) bool, step string) *NodeStep {
		for _, ns := range s.Nodes {
			if f(ns) {
				return &NodeStep{ns.Name, step}
			}
		}
		return nil
	}
	counts := fmt.Sprintf("%d/%d API servers on the store, %d store members, %d etcd members running", nStore, len(s.Nodes), members, etcds)
	if s.Failed != "" {
		return "failed: " + s.Failed + "; undo the steps that ran (" + counts + ")", nil
	}
	switch s.StoreMode {
	case "":
		if undo {
			return "on etcd, no store (" + counts + ")", nil
		}
		return "on etcd (" + counts + ")", &NodeStep{names[0], StepFirst}
	case api.Mirror:
		if !undo {
			if st := first(func(ns NodeStatus) bool { return !ns.Member }, StepJoin); st != nil {
				return "store forming, mirroring etcd (" + counts + ")", st
			}
			if st := first(func(ns NodeStatus) bool { return !onStore(ns.APIServer) }, StepSwitch); st != nil {
				return "mirroring etcd, API servers switching (" + counts + ")", st
			}
			return "mirroring etcd, every API server on the store (" + counts + ")", &NodeStep{names[0], StepCutover}
		}
		if st := first(func(ns NodeStatus) bool { return onStore(ns.APIServer) }, StepSwitchBack); st != nil {
			return "mirroring etcd, API servers switching back (" + counts + ")", st
		}
		for i := len(s.Nodes) - 1; i >= 0; i-- {
			if s.Nodes[i].Member {
				return "mirroring etcd, every API server on etcd, members leaving (" + counts + ")", &NodeStep{s.Nodes[i].Name, StepLeave}
			}
		}
		return "on etcd (" + counts + ")", nil
	case api.Owner:
		if !undo {
			return "moved: the store owns the data (" + counts + ")", nil
		}
		if st := first(func(ns NodeStatus) bool { return ns.Etcd }, StepStopEtcd); st != nil {
			return "the store owns the data, etcd stopping (" + counts + ")", st
		}
		return "the store owns the data, etcd stopped (" + counts + ")", &NodeStep{names[0], StepReplayTo}
	case api.ReplayingTo:
		if st := first(func(ns NodeStatus) bool { return !ns.Etcd }, StepRestoreEtcd); st != nil {
			return "the store replays onto etcd, etcd members restoring (" + counts + ")", st
		}
		return fmt.Sprintf("the store replays onto etcd, %d revisions behind (%s)", s.Lag, counts), &NodeStep{names[0], StepCutback}
	}
	return "unknown mode " + string(s.StoreMode), nil
}

// Print writes s for a person.
func (s *Status) Print(w io.Writer) {
	fmt.Fprintf(w, "%s\n", s.Phase)
	for _, ns := range s.Nodes {
		fmt.Fprintf(w, "  %-16s etcd %-7s store member %-5v API server on %s\n", ns.Name, map[bool]string{true: "running", false: "stopped"}[ns.Etcd], ns.Member, strings.TrimPrefix(ns.APIServer, "https://"))
	}
	if s.Next != nil {
		fmt.Fprintf(w, "next: on %s run `quantykube %s store --ha %s`\n", s.Next.Node, map[bool]string{true: "undo", false: "install"}[isUndo(s.Next.Step)], s.Next.Step)
	}
}

func isUndo(step string) bool { return KnownStep(step, true) }
