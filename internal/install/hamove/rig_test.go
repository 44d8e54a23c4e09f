package hamove

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quantyroot/quantykube/internal/install/staticpod"
	"github.com/quantyroot/quantykube/internal/install/systemd"
)

// rig is three "control-plane nodes" on one host, each on its own loopback
// address: a real etcd member run by a stand-in kubelet from its static pod
// manifest (started while etcd.yaml is in the node's manifest dir, stopped
// when it is not), the node's kubeadm-like PKI, and its store member run by
// procUnits from the unit the steps write. The API server is its manifest
// and, once startAPIServers ran, a stand-in that serves /readyz from it
// (apiserver_rig_test.go).
type rig struct {
	t     *testing.T
	dir   string
	ca    *testCA
	nodes []*Node
	addrs []string
	units *procUnits
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

func binOrSkip(t *testing.T, env string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		t.Skipf("%s is not set: the HA move's unit tests run real etcd and quantykube processes (QK_STORE_BIN: go build -o /tmp/quantykube ./cmd/quantykube; QK_ETCD, QK_ETCDUTL: scripts/deps.sh path etcd|etcdutl)", env)
	}
	return p
}

func newRig(t *testing.T) *rig {
	qk, etcd, etcdutl := binOrSkip(t, "QK_STORE_BIN"), binOrSkip(t, "QK_ETCD"), binOrSkip(t, "QK_ETCDUTL")
	if os.Geteuid() != 0 {
		t.Skip("the node steps run as root")
	}
	r := &rig{t: t, dir: t.TempDir(), ca: newTestCA(t), units: &procUnits{procs: map[string]*exec.Cmd{}, dir: t.TempDir()}}
	base := 40 + time.Now().Nanosecond()%150 // a /24 of loopback addresses of its own
	var ic []string
	for i := 1; i <= 3; i++ {
		addr := fmt.Sprintf("127.0.%d.%d", base, i)
		r.addrs = append(r.addrs, addr)
		ic = append(ic, fmt.Sprintf("node%d=https://%s:2380", i, addr))
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	for i, addr := range r.addrs {
		name := fmt.Sprintf("node%d", i+1)
		nd := filepath.Join(r.dir, name)
		pki := filepath.Join(nd, "pki")
		os.MkdirAll(filepath.Join(pki, "etcd"), 0o700)
		os.WriteFile(filepath.Join(pki, "etcd", "ca.crt"), r.ca.pem, 0o600)
		r.ca.issue(t, filepath.Join(pki, "etcd", "server.crt"), filepath.Join(pki, "etcd", "server.key"), name, addr, "127.0.0.1")
		r.ca.issue(t, filepath.Join(pki, "etcd", "peer.crt"), filepath.Join(pki, "etcd", "peer.key"), name, addr, "127.0.0.1")
		r.ca.issue(t, filepath.Join(pki, "apiserver-etcd-client.crt"), filepath.Join(pki, "apiserver-etcd-client.key"), "kube-apiserver-etcd-client")
		manifests := filepath.Join(nd, "manifests")
		os.MkdirAll(manifests, 0o700)
		etcdManifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
spec:
  containers:
  - command:
    - etcd
    - --name=%[1]s
    - --data-dir=%[2]s
    - --advertise-client-urls=https://%[3]s:2379
    - --listen-client-urls=https://%[3]s:2379
    - --initial-advertise-peer-urls=https://%[3]s:2380
    - --listen-peer-urls=https://%[3]s:2380
    - --initial-cluster=%[4]s
    - --initial-cluster-state=new
    - --initial-cluster-token=hamove-test
    - --cert-file=%[5]s/etcd/server.crt
    - --key-file=%[5]s/etcd/server.key
    - --trusted-ca-file=%[5]s/etcd/ca.crt
    - --client-cert-auth=true
    - --peer-cert-file=%[5]s/etcd/peer.crt
    - --peer-key-file=%[5]s/etcd/peer.key
    - --peer-trusted-ca-file=%[5]s/etcd/ca.crt
    - --peer-client-cert-auth=true
    - --listen-metrics-urls=http://%[3]s:2381
`, name, filepath.Join(nd, "etcd"), addr, strings.Join(ic, ","), pki)
		os.WriteFile(filepath.Join(manifests, "etcd.yaml"), []byte(etcdManifest), 0o600)
		os.WriteFile(filepath.Join(manifests, "kube-apiserver.yaml"), []byte(fmt.Sprintf("spec:\n  containers:\n  - command:\n    - kube-apiserver\n    - --etcd-servers=https://%s:2379\n    - --secure-port=%s\n", addr, freePort(t))), 0o600)
		p := DefaultPaths()
		p.Manifests, p.PKI, p.StateDir, p.DataDir, p.Binary = manifests, pki, filepath.Join(nd, "state"), filepath.Join(nd, "store"), qk
		p.Loopback, p.MetricsURL, p.Unit, p.Etcdutl = addr, "http://"+addr+":2482", "qk-store-"+name, etcdutl
		n := &Node{Paths: p, Log: slog.Default(), Out: &testWriter{t: t, prefix: name}, Units: r.units, BinaryGiven: true, NoKubeadmConfig: true, HoldTimeout: 5 * time.Second,
			APIServersWait: 2 * time.Second} // the rig's API servers are their manifests: no mirror pod lags
		n.APIServers = r.apiservers
		r.nodes = append(r.nodes, n)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			kubelet(ctx, t, etcd, filepath.Join(manifests, "etcd.yaml"), filepath.Join(r.dir, name+"-etcd.log"))
		}()
	}
	t.Cleanup(func() {
		r.stop()
		r.wg.Wait()
		r.units.stopAll()
		if t.Failed() {
			for _, f := range append(r.units.logs(), r.etcdLogs()...) {
				b, _ := os.ReadFile(f)
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("--- %s (tail)\n%s", f, b)
			}
		}
	})
	r.waitEtcd()
	return r
}

func (r *rig) etcdLogs() []string {
	m, _ := filepath.Glob(filepath.Join(r.dir, "*-etcd.log"))
	return m
}

// apiservers is Node.APIServers from the nodes' API server manifests.
func (r *rig) apiservers(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for i, n := range r.nodes {
		b, err := os.ReadFile(n.Paths.APIServerManifest())
		if err != nil {
			continue
		}
		v, _ := staticpod.Flag(b, "etcd-servers")
		out[fmt.Sprintf("node%d", i+1)] = v
	}
	return out, nil
}

func (r *rig) client(endpoints ...string) *clientv3.Client {
	r.t.Helper()
	c, err := r.nodes[0].Paths.Dial(endpoints[0])
	if err != nil {
		r.t.Fatal(err)
	}
	c.SetEndpoints(endpoints...)
	return c
}

func (r *rig) etcdClient() *clientv3.Client {
	var eps []string
	for _, a := range r.addrs {
		eps = append(eps, "https://"+a+":2379")
	}
	return r.client(eps...)
}

func (r *rig) storeClient() *clientv3.Client {
	var eps []string
	for _, a := range r.addrs {
		eps = append(eps, "https://"+a+":2479")
	}
	return r.client(eps...)
}

func (r *rig) waitEtcd() {
	r.t.Helper()
	c := r.etcdClient()
	defer c.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.Put(ctx, "/ready", "1")
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("etcd did not answer: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var flagLine = regexp.MustCompile(`(?m)^\s*- (--[a-z-]+=.*)$`)

// kubelet runs etcd from manifest while the file exists, as kubelet runs a
// static pod: started when it appears, stopped (SIGTERM) when it goes.
func kubelet(ctx context.Context, t *testing.T, bin, manifest, logPath string) {
	var cmd *exec.Cmd
	var done chan struct{}
	for {
		_, err := os.Stat(manifest)
		running := cmd != nil
		if running {
			select {
			case <-done:
				cmd, running = nil, false
			default:
			}
		}
		switch {
		case ctx.Err() != nil:
			if running {
				cmd.Process.Kill()
				<-done
			}
			return
		case err == nil && !running:
			b, _ := os.ReadFile(manifest)
			var args []string
			for _, m := range flagLine.FindAllStringSubmatch(string(b), -1) {
				args = append(args, m[1])
			}
			cmd = exec.Command(bin, args...)
			lf, _ := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
			cmd.Stdout, cmd.Stderr = lf, lf
			if err := cmd.Start(); err != nil {
				t.Errorf("start etcd: %v", err)
				return
			}
			done = make(chan struct{})
			go func(c *exec.Cmd, d chan struct{}) { c.Wait(); lf.Close(); close(d) }(cmd, done)
		case err != nil && running:
			cmd.Process.Signal(syscall.SIGTERM)
			<-done
			cmd = nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// procUnits is Units as processes: the unit's ExecStart, restarted never.
type procUnits struct {
	mu    sync.Mutex
	dir   string
	procs map[string]*exec.Cmd
}

var execStart = regexp.MustCompile(`(?m)^ExecStart=(.*)$`)

func (u *procUnits) Install(ctx context.Context, unit systemd.Unit) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if c := u.procs[unit.Name]; c != nil && c.ProcessState == nil {
		return nil
	}
	m := execStart.FindStringSubmatch(unit.Content)
	if m == nil {
		return fmt.Errorf("unit %s has no ExecStart", unit.Name)
	}
	f := strings.Fields(m[1])
	cmd := exec.Command(f[0], f[1:]...)
	lf, _ := os.OpenFile(filepath.Join(u.dir, unit.Name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { cmd.Wait(); lf.Close() }()
	u.procs[unit.Name] = cmd
	return nil
}

func (u *procUnits) Remove(ctx context.Context, name string) error {
	u.mu.Lock()
	c := u.procs[name]
	delete(u.procs, name)
	u.mu.Unlock()
	if c == nil {
		return nil
	}
	c.Process.Signal(syscall.SIGTERM)
	for i := 0; i < 100 && c.ProcessState == nil; i++ {
		if c.Process.Signal(syscall.Signal(0)) != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.Process.Kill()
	return nil
}

func (u *procUnits) running(name string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.procs[name] != nil
}

func (u *procUnits) stopAll() {
	u.mu.Lock()
	var names []string
	for n := range u.procs {
		names = append(names, n)
	}
	u.mu.Unlock()
	for _, n := range names {
		u.Remove(context.Background(), n)
	}
}

func (u *procUnits) logs() []string {
	m, _ := filepath.Glob(filepath.Join(u.dir, "*.log"))
	return m
}

type testWriter struct {
	t      *testing.T
	prefix string
}

func (w *testWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s: %s", w.prefix, strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func quiet() *zap.Logger { return zap.NewNop() }
