package hamove

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/quantyroot/quantykube/internal/install/etcdrestore"
	"github.com/quantyroot/quantykube/internal/install/staticpod"
	"github.com/quantyroot/quantykube/internal/install/storemove"
)

// Paths are the files and ports an HA move uses on one node. The embedded
// storemove.Paths are kubeadm's (manifests, PKI, admin kubeconfig) and the
// store's (data dir, binary); StateDir is the HA move's own.
type Paths struct {
	storemove.Paths
	// Etcdutl is etcd's etcdutl binary, of the cluster's etcd version
	// (undo restores etcd's members with it).
	Etcdutl string
	// ClientPort is the store's client port, on 127.0.0.1 (the API server's
	// URL) and on the node's address (the other nodes' steps reach it there).
	ClientPort string
	// PeerPort is the store members' peer port on the node's address.
	PeerPort string
	// SnapshotPort is where the node that ran replay-to serves its snapshot
	// to the others' restore-etcd (on the node's address), and SnapshotUnit
	// the server's systemd unit.
	SnapshotPort string
	SnapshotUnit string
	// MetricsURL serves the member's /health.
	MetricsURL string
	// Unit is the store member's systemd unit.
	Unit string
	// Loopback is the address the local API server reaches its local etcd
	// member and store member on (kubeadm: 127.0.0.1; tests that run
	// several nodes on one host give each its own).
	Loopback string
}

// DefaultPaths are kubeadm's and QuantyKube's defaults.
func DefaultPaths() Paths {
	p := storemove.DefaultPaths()
	p.StateDir = "/var/lib/quantykube/install/store-ha"
	return Paths{Paths: p, Etcdutl: "/usr/local/bin/etcdutl", ClientPort: "2479", PeerPort: "2480",
		SnapshotPort: "2481", SnapshotUnit: "quantykube-store-ha-snapshot",
		MetricsURL: storemove.StoreMetricsURL, Unit: storemove.UnitName, Loopback: "127.0.0.1"}
}

// LocalURL is the local member's client URL, the one the API server uses.
func (p Paths) LocalURL() string { return "https://" + p.Loopback + ":" + p.ClientPort }

// OnStore reports whether an API server's --etcd-servers names a local
// store member (https://<loopback>:ClientPort: 127.0.0.1 on every kubeadm
// node, another loopback address per node in tests).
func (p Paths) OnStore(etcdServers string) bool {
	u, err := url.Parse(etcdServers)
	return err == nil && !strings.Contains(etcdServers, ",") && u.Port() == p.ClientPort
}

// localEtcd is the local etcd member, as kubeadm's API server reaches it.
func (p Paths) localEtcd() string { return "https://" + p.Loopback + ":2379" }

// localEtcdAddr is localEtcd's host:port.
func (p Paths) localEtcdAddr() string { return p.Loopback + ":2379" }

func (p Paths) etcdManifest() string    { return filepath.Join(p.Manifests, "etcd.yaml") }
func (p Paths) stepDir(s string) string { return filepath.Join(p.StateDir, s) }
func (p Paths) lockFile() string        { return filepath.Join(p.StateDir, "lock") }
func (p Paths) factsFile() string       { return filepath.Join(p.StateDir, "node.json") }

// savedEtcdManifest is etcd's static pod manifest while undo has it stopped.
func (p Paths) savedEtcdManifest() string { return filepath.Join(p.stepDir(StepStopEtcd), "etcd.yaml") }

// savedAPIServer is the API server's etcd manifest kept by switch.
func (p Paths) savedAPIServer() string {
	return filepath.Join(p.stepDir(StepSwitch), "kube-apiserver.etcd.yaml")
}

func (p Paths) peerCert() string { return filepath.Join(p.PKI, "etcd", "peer.crt") }
func (p Paths) peerKey() string  { return filepath.Join(p.PKI, "etcd", "peer.key") }

// Facts are what a node's steps need to know about it, read from kubeadm's
// etcd manifest the first time a step runs and kept in the state dir (undo
// moves the manifest away).
type Facts struct {
	// Name is the node's etcd member name (kubeadm: the node name); its
	// store member has the same name.
	Name string `json:"name"`
	// Address is the node's address (from etcd's client URL).
	Address string `json:"address"`
	// EtcdDataDir is the local etcd member's data dir.
	EtcdDataDir string `json:"etcdDataDir"`
	// EtcdPeerURL is the local etcd member's peer URL.
	EtcdPeerURL string `json:"etcdPeerURL"`
	// EtcdToken is etcd's --initial-cluster-token (etcd's default if unset).
	EtcdToken string `json:"etcdToken"`
}

// PeerURL is the node's store member's peer URL.
func (f Facts) PeerURL(p Paths) string { return "https://" + f.Address + ":" + p.PeerPort }

// ClientURL is the node's store member's client URL on its address.
func (f Facts) ClientURL(p Paths) string { return "https://" + f.Address + ":" + p.ClientPort }

// loadFacts reads the node's facts from the state dir, or from etcd's
// manifest (saving them) the first time.
func (p Paths) loadFacts() (Facts, error) {
	var f Facts
	if b, err := os.ReadFile(p.factsFile()); err == nil {
		if err := json.Unmarshal(b, &f); err != nil {
			return f, fmt.Errorf("%s is corrupt (%v); move it aside and rerun (it is read again from %s)", p.factsFile(), err, p.etcdManifest())
		}
		return f, nil
	}
	m, err := os.ReadFile(p.etcdManifest())
	if errors.Is(err, os.ErrNotExist) {
		if m, err = os.ReadFile(p.savedEtcdManifest()); err != nil {
			return f, fmt.Errorf("neither %s nor %s exists: this is not a kubeadm control-plane node with stacked etcd (or pass --manifests)", p.etcdManifest(), p.savedEtcdManifest())
		}
	} else if err != nil {
		return f, fmt.Errorf("read %s: %w", p.etcdManifest(), err)
	}
	if f, err = factsOf(m); err != nil {
		return f, fmt.Errorf("%s: %w", p.etcdManifest(), err)
	}
	b, _ := json.Marshal(f)
	if err := os.MkdirAll(p.StateDir, 0o700); err != nil {
		return f, fmt.Errorf("create %s: %w", p.StateDir, err)
	}
	return f, staticpod.WriteAtomic(p.factsFile(), b, 0o600)
}

// factsOf reads Facts from kubeadm's etcd manifest.
func factsOf(manifest []byte) (Facts, error) {
	m, err := etcdrestore.MemberOf(manifest)
	if err != nil {
		return Facts{}, err
	}
	u, _ := url.Parse(m.ClientURL) // MemberOf checked it
	return Facts{Name: m.Name, Address: u.Hostname(), EtcdDataDir: m.DataDir, EtcdPeerURL: m.PeerURL, EtcdToken: m.Token}, nil
}
