package hamove

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/internal/install/staticpod"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/mirror/client"
)

// EtcdMember is an etcd member as the move needs it.
type EtcdMember struct {
	Name      string `json:"name"`
	PeerURL   string `json:"peerURL"`
	ClientURL string `json:"clientURL"`
}

// Host is the member's address (its client URL's host).
func (m EtcdMember) Host() string {
	u, err := url.Parse(m.ClientURL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// callTimeout bounds one request to etcd or the store.
const callTimeout = 10 * time.Second

func (p Paths) etcdMembersFile() string { return filepath.Join(p.StateDir, "etcd-members.json") }

// etcdMembers lists etcd's members through the local one, saving the list;
// when etcd does not answer (undo stopped it) it returns the list saved last.
func (n *Node) etcdMembers(ctx context.Context) ([]EtcdMember, error) {
	ms, err := n.liveEtcdMembers(ctx)
	if err == nil {
		b, _ := json.Marshal(ms)
		return ms, staticpod.WriteAtomic(n.Paths.etcdMembersFile(), b, 0o600)
	}
	saved, rerr := n.savedEtcdMembers()
	if rerr != nil {
		return nil, fmt.Errorf("list etcd's members through %s: %w (and %v)", n.Paths.localEtcd(), err, rerr)
	}
	return saved, nil
}

// savedEtcdMembers is etcd's member list as the last step that read it
// saved it (undo's steps run while the local member is stopped).
func (n *Node) savedEtcdMembers() ([]EtcdMember, error) {
	b, err := os.ReadFile(n.Paths.etcdMembersFile())
	if err != nil {
		return nil, fmt.Errorf("no member list was saved before: %w", err)
	}
	var saved []EtcdMember
	if err := json.Unmarshal(b, &saved); err != nil {
		return nil, fmt.Errorf("%s is corrupt: %w", n.Paths.etcdMembersFile(), err)
	}
	return saved, nil
}

func (n *Node) liveEtcdMembers(ctx context.Context) ([]EtcdMember, error) {
	c, err := n.dial(n.Paths.localEtcd())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := c.MemberList(cctx)
	if err != nil {
		return nil, err
	}
	var out []EtcdMember
	for _, m := range resp.Members {
		if m.IsLearner || len(m.PeerURLs) == 0 || len(m.ClientURLs) == 0 {
			return nil, fmt.Errorf("etcd member %q is a learner or not started; promote or remove it first", m.Name)
		}
		out = append(out, EtcdMember{Name: m.Name, PeerURL: m.PeerURLs[0], ClientURL: m.ClientURLs[0]})
	}
	return out, nil
}

// etcdPeer is etcd's cluster as the store members reach it (the files are
// at kubeadm's paths on every control-plane node).
func (n *Node) etcdPeer(ms []EtcdMember) api.Peer {
	p := api.Peer{CAFile: n.Paths.EtcdCA(), CertFile: n.Paths.ClientCert(), KeyFile: n.Paths.ClientKey()}
	for _, m := range ms {
		p.Endpoints = append(p.Endpoints, m.ClientURL)
	}
	return p
}

// storeURLs are the store members' client URLs on the control-plane nodes'
// addresses (one member per etcd member's host).
func (n *Node) storeURLs(ms []EtcdMember) []string {
	var out []string
	for _, m := range ms {
		out = append(out, "https://"+m.Host()+":"+n.Paths.ClientPort)
	}
	return out
}

// storeMembers lists the store cluster's members through any member that
// answers; ok is false when none does (no store cluster yet).
func (n *Node) storeMembers(ctx context.Context, ms []EtcdMember) (members []*storeMember, ok bool, err error) {
	c, err := n.dial(n.storeURLs(ms)...)
	if err != nil {
		return nil, false, err
	}
	defer c.Close()
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := c.MemberList(cctx)
	if err != nil {
		return nil, false, nil
	}
	for _, m := range resp.Members {
		sm := &storeMember{ID: m.ID, Name: m.Name, Started: len(m.ClientURLs) > 0}
		if len(m.PeerURLs) > 0 {
			sm.PeerURL = m.PeerURLs[0]
		}
		members = append(members, sm)
	}
	return members, true, nil
}

type storeMember struct {
	ID      uint64
	Name    string
	PeerURL string
	Started bool
}

// revision is the current revision of the cluster c talks to.
func revision(ctx context.Context, c *clientv3.Client) (int64, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.Get(cctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("read the revision of %s: %w", strings.Join(c.Endpoints(), ","), err)
	}
	return resp.Header.Revision, nil
}

// mirrorStatus is the local member's mirror status.
func (n *Node) mirrorStatus(ctx context.Context) (*api.Status, error) {
	return n.mirrorStatusAt(ctx, n.Paths.LocalURL())
}

// mirrorStatusAt is the mirror status of the member at endpoint.
func (n *Node) mirrorStatusAt(ctx context.Context, endpoint string) (*api.Status, error) {
	a, err := client.Dial(endpoint, client.Files{CAFile: n.Paths.EtcdCA(), CertFile: n.Paths.ClientCert(), KeyFile: n.Paths.ClientKey()})
	if err != nil {
		return nil, err
	}
	defer a.Close()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	st, err := a.Status(cctx)
	if err != nil {
		if client.Unreachable(err) {
			return nil, fmt.Errorf("no store member answers at %s (%v): on a node without a member, run `quantykube install store --ha %s` (the first node) or `--ha %s` first", endpoint, err, StepFirst, StepJoin)
		}
		return nil, fmt.Errorf("mirror status of the store member at %s: %w", endpoint, err)
	}
	return st, nil
}
