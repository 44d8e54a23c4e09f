package hamove

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/staticpod"
	"github.com/quantyroot/quantykube/internal/store/mirror"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/snapshot"
)

func (n *Node) firstPlan() *install.Plan {
	return &install.Plan{Op: StepFirst, Steps: []install.Step{
		{Name: "snapshot", Impact: "none: a snapshot of etcd is saved under the state dir (etcd's own format), read through the local member",
			Do: n.snapshotEtcdDo},
		{Name: "restore", Impact: "none: the snapshot becomes the store's data dir with every revision, recorded as a mirror of etcd before it first runs",
			Do: n.restoreDo, Undo: n.removeDataDir},
		{Name: "start-member", Impact: "none: the quantykube-store unit starts as the store's first member (clients 127.0.0.1 and the node's address, peers on the node's address); it replays etcd's changes since the snapshot",
			Do: func(ctx context.Context) error { return n.startMember(ctx, StepFirst, "new") }, Undo: n.removeMember},
		{Name: "level", Impact: "none: waits until the member has applied etcd's current revision",
			Do: n.waitLevel},
	}}
}

// firstPreflight: a stacked-etcd control plane of several members, this
// node one of them, its API server on its local etcd, no store cluster yet.
func (n *Node) firstPreflight(ctx context.Context) error {
	ms, err := n.checkControlPlane(ctx)
	if err != nil {
		return err
	}
	if sms, ok, err := n.storeMembers(ctx, ms); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("a store cluster already runs (%d members): run `quantykube install store --ha %s` on each control-plane node without a member instead", len(sms), StepJoin)
	}
	return n.checkFreshMember()
}

// checkControlPlane checks what every install step needs: kubeadm's files,
// etcd of several members answering, this node one of them. It returns
// etcd's members.
func (n *Node) checkControlPlane(ctx context.Context) ([]EtcdMember, error) {
	for _, f := range []string{n.Paths.EtcdCA(), n.Paths.ServerCert(), n.Paths.ServerKey(), n.Paths.ClientCert(), n.Paths.ClientKey(), n.Paths.peerCert(), n.Paths.peerKey()} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("certificate %s is missing; the HA move needs kubeadm's etcd certificates on every control-plane node (pass --pki if they are elsewhere)", f)
		}
	}
	ms, err := n.liveEtcdMembers(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd does not answer through %s (%v); the HA move starts from a healthy stacked etcd", n.Paths.localEtcd(), err)
	}
	if len(ms) < 2 {
		return nil, errors.New("etcd has one member: this is a single control plane; use `quantykube install store` without --ha")
	}
	found := false
	for _, m := range ms {
		found = found || m.Name == n.facts.Name
	}
	if !found {
		return nil, fmt.Errorf("this node's etcd member %q is not in etcd's member list; run the step on a control-plane node with stacked etcd", n.facts.Name)
	}
	if _, err := n.etcdMembers(ctx); err != nil { // saves the list for undo
		return nil, err
	}
	return ms, nil
}

// checkFreshMember: no member of the store on this node yet.
func (n *Node) checkFreshMember() error {
	if ents, err := os.ReadDir(n.Paths.DataDir); err == nil && len(ents) > 0 {
		return fmt.Errorf("the store's data dir %s is not empty; move it aside first (it may hold an earlier move's data)", n.Paths.DataDir)
	}
	addr := strings.TrimPrefix(n.Paths.LocalURL(), "https://")
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s is taken (%v); stop what listens there first", addr, err)
	}
	return l.Close()
}

func (p Paths) snapshotPathFile() string { return filepath.Join(p.stepDir(StepFirst), "snapshot.path") }

func (n *Node) snapshotEtcdDo(ctx context.Context) error {
	path, size, err := n.Paths.SaveSnapshot(ctx, n.Paths.localEtcd(), "etcd-for-store")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(n.Paths.stepDir(StepFirst), 0o700); err != nil {
		return err
	}
	fmt.Fprintf(n.Out, "  etcd saved to %s (%d KiB)\n", path, size>>10)
	return staticpod.WriteAtomic(n.Paths.snapshotPathFile(), []byte(path), 0o600)
}

func (n *Node) restoreDo(ctx context.Context) error {
	snap, err := os.ReadFile(n.Paths.snapshotPathFile())
	if err != nil {
		return fmt.Errorf("read the snapshot's path: %w", err)
	}
	if err := os.RemoveAll(n.Paths.DataDir); err != nil {
		return fmt.Errorf("clear %s: %w", n.Paths.DataDir, err)
	}
	st, err := snapshot.Restore(ctx, string(snap), n.Paths.DataDir, n.Log)
	if err != nil {
		return err
	}
	ms, err := n.etcdMembers(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := mirror.StartOffline(ctx, n.Paths.DataDir, &api.StartRequest{Source: n.etcdPeer(ms), Revision: st.Rev}, n.Log); err != nil {
		return fmt.Errorf("record the mirror of etcd in %s: %w", n.Paths.DataDir, err)
	}
	fmt.Fprintf(n.Out, "  restored %d keys at revision %d in %v; mirror of etcd recorded in %v\n", st.Keys, st.Rev, st.Duration.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	ic := n.facts.Name + "=" + n.facts.PeerURL(n.Paths)
	return staticpod.WriteAtomic(n.Paths.initialClusterFile(StepFirst), []byte(ic), 0o600)
}

func (n *Node) removeDataDir(ctx context.Context) error {
	if err := n.Units.Remove(ctx, n.Paths.Unit); err != nil {
		return err
	}
	if err := os.RemoveAll(n.Paths.DataDir); err != nil {
		return fmt.Errorf("remove %s: %w", n.Paths.DataDir, err)
	}
	return nil
}
