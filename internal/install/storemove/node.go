package storemove

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"

	"github.com/quantyroot/quantykube/internal/install/staticpod"
)

// Paths are the files a move reads and writes. Defaults are kubeadm's.
type Paths struct {
	Manifests  string // kubelet's static pod directory
	PKI        string // kubeadm's PKI directory
	StateDir   string // the move's journal and saved files
	DataDir    string // the store's data
	Binary     string // where the store's binary is installed for its unit
	KubeletCfg string // kubelet's configuration (for the CRI endpoint)
	Kubeconfig string // kubeadm's admin kubeconfig (to edit kubeadm-config)
	CgroupRoot string // where kubelet's pod cgroups are (to see it finish a pod)
}

// DefaultPaths are kubeadm's and QuantyKube's defaults.
func DefaultPaths() Paths {
	return Paths{
		Manifests:  "/etc/kubernetes/manifests",
		PKI:        "/etc/kubernetes/pki",
		StateDir:   "/var/lib/quantykube/install/store",
		DataDir:    "/var/lib/quantykube/store",
		Binary:     "/usr/local/bin/quantykube",
		KubeletCfg: "/var/lib/kubelet/config.yaml",
		Kubeconfig: "/etc/kubernetes/admin.conf",
		CgroupRoot: "/sys/fs/cgroup",
	}
}

func (p Paths) APIServerManifest() string { return filepath.Join(p.Manifests, "kube-apiserver.yaml") }

// manifestInPlace reports whether the API server's manifest is in kubelet's
// directory and whether it names the store: stop-apiserver saves it before
// it removes it and only switch-apiserver points it at the store, so one in
// place that names the side a plan left was never moved out by that plan.
func (p Paths) manifestInPlace() (present, onStore bool) {
	cur, err := os.ReadFile(p.APIServerManifest())
	if err != nil {
		return false, false
	}
	ep, _ := staticpod.Flag(cur, "etcd-servers")
	return true, ep == StoreURL
}

// savedManifest is the original (etcd) manifest, kept byte for byte.
func (p Paths) savedManifest() string { return filepath.Join(p.StateDir, "kube-apiserver.etcd.yaml") }

// savedStoreManifest is the store's manifest, kept while undo runs.
func (p Paths) savedStoreManifest() string {
	return filepath.Join(p.StateDir, "kube-apiserver.store.yaml")
}

// savedClusterConfig is kubeadm's ClusterConfiguration as it was before the
// move (etcd.local), kept byte for byte; storeClusterConfig is what install
// wrote in its place.
func (p Paths) savedClusterConfig() string {
	return filepath.Join(p.StateDir, "kubeadm-config.etcd.yaml")
}
func (p Paths) storeClusterConfig() string {
	return filepath.Join(p.StateDir, "kubeadm-config.store.yaml")
}

// requestTimeout bounds one request to the cluster's API.
const requestTimeout = 15 * time.Second

func (p Paths) journal() string  { return filepath.Join(p.StateDir, "journal.jsonl") }
func (p Paths) lockFile() string { return filepath.Join(p.StateDir, "lock") }
func (p Paths) EtcdCA() string   { return filepath.Join(p.PKI, "etcd", "ca.crt") }
func (p Paths) ServerCert() string {
	return filepath.Join(p.PKI, "etcd", "server.crt")
}
func (p Paths) ServerKey() string  { return filepath.Join(p.PKI, "etcd", "server.key") }
func (p Paths) ClientCert() string { return filepath.Join(p.PKI, "apiserver-etcd-client.crt") }
func (p Paths) ClientKey() string  { return filepath.Join(p.PKI, "apiserver-etcd-client.key") }

// StoreURL is where the store serves, beside etcd's 2379.
const StoreURL = "https://127.0.0.1:2479"

// StoreMetricsURL serves the store's /health.
const StoreMetricsURL = "http://127.0.0.1:2482"

// clientTLS is the TLS config kube-apiserver uses towards etcd (and so the
// move uses towards etcd and the store).
func (p Paths) clientTLS() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(p.ClientCert(), p.ClientKey())
	if err != nil {
		return nil, fmt.Errorf("load %s: %w; is this a kubeadm control-plane node?", p.ClientCert(), err)
	}
	ca, err := os.ReadFile(p.EtcdCA())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w; is this a kubeadm control-plane node?", p.EtcdCA(), err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s holds no certificate", p.EtcdCA())
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Dial opens an etcd v3 client to endpoint with kube-apiserver's credentials.
func (p Paths) Dial(endpoint string) (*clientv3.Client, error) {
	tlsCfg, err := p.clientTLS()
	if err != nil {
		return nil, err
	}
	return clientv3.New(clientv3.Config{
		Endpoints: []string{endpoint}, TLS: tlsCfg, DialTimeout: 5 * time.Second,
		MaxCallRecvMsgSize: 512 << 20, Logger: quietZap(),
	})
}

// Preflight checks what install store needs, changing nothing. It returns
// the original manifest and etcd's endpoint.
func (p Paths) preflightInstall(ctx context.Context) ([]byte, string, error) {
	if os.Geteuid() != 0 {
		return nil, "", errors.New("install store must run as root on the control-plane node (try sudo)")
	}
	manifest, err := os.ReadFile(p.APIServerManifest())
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w; this is not a kubeadm control-plane node (or pass --manifests)", p.APIServerManifest(), unwrap(err))
	}
	endpoint, ok := staticpod.Flag(manifest, "etcd-servers")
	if !ok {
		return nil, "", fmt.Errorf("%s has no --etcd-servers flag; it is not a kubeadm API server manifest", p.APIServerManifest())
	}
	if endpoint == StoreURL {
		return nil, "", errors.New("the API server already runs on quantykube store; nothing to install (use `quantykube undo store` to go back)")
	}
	if strings.Contains(endpoint, ",") {
		return nil, "", fmt.Errorf("the API server uses several etcd members (%s); only a single local etcd is supported", endpoint)
	}
	for _, f := range []string{p.EtcdCA(), p.ServerCert(), p.ServerKey(), p.ClientCert(), p.ClientKey()} {
		if _, err := os.Stat(f); err != nil {
			return nil, "", fmt.Errorf("certificate %s is missing (%v); install store needs kubeadm's etcd certificates", f, unwrap(err))
		}
	}
	if l, err := net.Listen("tcp", "127.0.0.1:2479"); err != nil {
		return nil, "", fmt.Errorf("port 2479 on 127.0.0.1 is taken (%v); stop what listens there first", err)
	} else {
		l.Close()
	}
	cli, err := p.Dial(endpoint)
	if err != nil {
		return nil, "", err
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := cli.Status(sctx, endpoint)
	if err != nil {
		return nil, "", fmt.Errorf("etcd at %s does not answer with kubeadm's certificates (%v); check that the etcd static pod runs", endpoint, err)
	}
	if err := refuseSeveralMembers(sctx, cli); err != nil {
		return nil, "", err
	}
	if err := p.checkSpace(st.DbSize); err != nil {
		return nil, "", err
	}
	return manifest, endpoint, nil
}

// checkSpace wants twice etcd's database size free where the store goes.
func (p Paths) checkSpace(dbSize int64) error {
	dir := p.DataDir
	for {
		if _, err := os.Stat(dir); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	free := int64(fs.Bavail) * fs.Bsize
	if free < 2*dbSize+64<<20 {
		return fmt.Errorf("only %d MiB free under %s, the copy needs about %d MiB; free some space", free>>20, dir, (2*dbSize+64<<20)>>20)
	}
	return nil
}

func unwrap(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// refuseSeveralMembers refuses an etcd cluster of several members (stacked
// etcd on several control-plane nodes): moving one node's API server alone
// would leave the others writing to etcd while it writes to the store.
func refuseSeveralMembers(ctx context.Context, cli *clientv3.Client) error {
	ml, err := cli.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("list etcd's members: %w", err)
	}
	if len(ml.Members) <= 1 {
		return nil
	}
	names := make([]string, 0, len(ml.Members))
	for _, mem := range ml.Members {
		names = append(names, mem.Name)
	}
	return fmt.Errorf("etcd has %d members (%s): this control plane is one of several, and moving its API server alone would split the cluster's data; move them together: `quantykube install store --ha status` on a control-plane node names the node steps to run, one at a time", len(names), strings.Join(names, ", "))
}
