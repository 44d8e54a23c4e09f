package replica

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/etcd/server/v3/etcdserver/api/rafthttp"
	"go.etcd.io/raft/v3"
)

// membersPath serves the member list to joining members (etcd's /members).
const membersPath = "/members"

type peerListener struct {
	net.Listener
	tls bool
}

// listenPeers binds every --listen-peer-urls before anything is written.
func listenPeers(urls []string) ([]peerListener, error) {
	var out []peerListener
	for _, raw := range urls {
		u, _ := url.Parse(raw)
		l, err := net.Listen("tcp", u.Host)
		if err != nil {
			closeListeners(out)
			if errors.Is(err, syscall.EADDRINUSE) {
				return nil, fmt.Errorf("--listen-peer-urls %s: address already in use; stop the process holding it or pass another URL", raw)
			}
			return nil, fmt.Errorf("--listen-peer-urls %s: %w", raw, err)
		}
		out = append(out, peerListener{Listener: l, tls: u.Scheme == "https"})
	}
	return out, nil
}

func closeListeners(ls []peerListener) {
	for _, l := range ls {
		_ = l.Close()
	}
}

// servePeers serves raft's transport and the member list on the peer
// listeners, with the peer TLS settings.
func (r *Replica) servePeers(ls []peerListener) {
	mux := http.NewServeMux()
	mux.Handle(rafthttp.RaftPrefix, r.transport.Handler())
	mux.Handle(rafthttp.RaftPrefix+"/", r.transport.Handler())
	mux.HandleFunc(membersPath, r.serveMembers)
	mux.HandleFunc(promotePrefix, r.servePromote)
	var tlsCfg *tls.Config
	if !r.cfg.PeerTLS.Empty() {
		var err error
		if tlsCfg, err = r.cfg.PeerTLS.ServerConfig(); err != nil {
			r.fail(fmt.Errorf("peer TLS: %w", err))
			return
		}
	}
	for _, l := range ls {
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		r.peerServers = append(r.peerServers, srv)
		ln := l.Listener
		if l.tls {
			ln = tls.NewListener(ln, tlsCfg)
		}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				r.fail(fmt.Errorf("serve peers on %s: %w", l.Addr(), err))
			}
		}()
	}
}

func (r *Replica) stopPeers() {
	for _, s := range r.peerServers {
		_ = s.Close()
	}
}

// serveMembers answers GET /members with the members in etcd's JSON form and
// the cluster id in X-Etcd-Cluster-ID.
func (r *Replica) serveMembers(w http.ResponseWriter, req *http.Request) {
	ms, err := r.store.Members()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out := make([]*membership.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, toEtcdMember(m))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Etcd-Cluster-ID", types.ID(r.clusterID).String())
	_ = json.NewEncoder(w).Encode(out)
}

func toEtcdMember(m *pb.Member) *membership.Member {
	return &membership.Member{
		ID:             types.ID(m.ID),
		RaftAttributes: membership.RaftAttributes{PeerURLs: m.PeerURLs, IsLearner: m.IsLearner},
		Attributes:     membership.Attributes{Name: m.Name, ClientURLs: m.ClientURLs},
	}
}

// join finds this member in the running cluster (added there with etcdctl
// member add) by asking the peers of --initial-cluster for their members,
// and creates its WAL. The store's state arrives as a snapshot.
func (r *Replica) join() ([]*pb.Member, error) {
	urls, _ := r.cfg.initialCluster()
	adv, _ := types.NewURLs(r.cfg.AdvertisePeerURLs)
	var peerURLs []string
	for name, us := range urls {
		if name != r.cfg.Name {
			peerURLs = append(peerURLs, us.StringSlice()...)
		}
	}
	if len(peerURLs) == 0 {
		return nil, errors.New("--initial-cluster-state existing needs the running members in --initial-cluster (name=peerURL of each)")
	}
	ms, cid, err := r.fetchMembers(peerURLs)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		mu, _ := types.NewURLs(m.PeerURLs)
		if sameURLs(mu, adv) {
			r.id = m.ID
			r.isLearner.Store(m.IsLearner)
		}
	}
	if r.id == 0 {
		return nil, fmt.Errorf("the cluster has no member with peer URLs %s; add this member first: etcdctl member add %s --peer-urls=%s", adv, r.cfg.Name, adv)
	}
	r.clusterID = cid
	if err := r.createWAL(nil); err != nil {
		return nil, err
	}
	r.confState = nil
	r.log.Info("joining a running cluster", "member", types.ID(r.id).String(), "cluster", types.ID(cid).String(), "members", len(ms))
	r.node = raft.RestartNode(r.raftConfig(0))
	return ms, nil
}

// fetchMembers asks each peer URL in turn for the member list, for up to
// 30 s (the other members may be starting too).
func (r *Replica) fetchMembers(peerURLs []string) ([]*pb.Member, uint64, error) {
	tr, err := transportFor(r.cfg)
	if err != nil {
		return nil, 0, err
	}
	client := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	var lastErr error
	for time.Now().Before(deadline) {
		for _, u := range peerURLs {
			ms, cid, err := getMembers(client, u)
			if err == nil {
				return ms, cid, nil
			}
			lastErr = err
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-r.stopc:
			return nil, 0, errors.New("stopped")
		}
	}
	return nil, 0, fmt.Errorf("cannot get the member list from the cluster (%v); check that --initial-cluster names running members and that the peer TLS flags match theirs", lastErr)
}

func getMembers(client *http.Client, peerURL string) ([]*pb.Member, uint64, error) {
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, peerURL+membersPath, nil)
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("GET %s%s: %s", peerURL, membersPath, resp.Status)
	}
	var ems []*membership.Member
	if err := json.NewDecoder(resp.Body).Decode(&ems); err != nil {
		return nil, 0, fmt.Errorf("GET %s%s: %w", peerURL, membersPath, err)
	}
	cid, err := types.IDFromString(resp.Header.Get("X-Etcd-Cluster-ID"))
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s%s: cluster id: %w", peerURL, membersPath, err)
	}
	var ms []*pb.Member
	for _, m := range ems {
		ms = append(ms, &pb.Member{ID: uint64(m.ID), Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner})
	}
	return ms, uint64(cid), nil
}

func transportFor(cfg Config) (*http.Transport, error) {
	tr := &http.Transport{}
	if !cfg.PeerTLS.Empty() {
		c, err := cfg.PeerTLS.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("peer TLS: %w", err)
		}
		tr.TLSClientConfig = c
	}
	return tr, nil
}

// syncPeers makes the transport's peers the members the store holds (or
// the given list, for a member that joins and holds none yet).
func (r *Replica) syncPeers(ms []*pb.Member) {
	if stored, _ := r.store.Members(); len(stored) > 0 {
		ms = stored
	}
	want := map[types.ID]bool{}
	for _, m := range ms {
		if m.ID == r.id {
			r.isLearner.Store(m.IsLearner)
			continue
		}
		id := types.ID(m.ID)
		want[id] = true
		if !r.peers[id] {
			r.transport.AddPeer(id, m.PeerURLs)
		} else {
			r.transport.UpdatePeer(id, m.PeerURLs)
		}
	}
	for id := range r.peers {
		if !want[id] {
			r.transport.RemovePeer(id)
		}
	}
	r.peers = want
}
