package hamove

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/install/staticpod"
)

// The rig's API servers, for the switch and switch-back steps. What those
// steps do to a node is real: they save, remove and write the API server's
// static pod manifest, list its container through the CRI and wait for its
// /readyz on 127.0.0.1:--secure-port. What answers is a stand-in (a real
// kube-apiserver per rig node, restarted a dozen times by the gauntlet,
// would add minutes to CI stage 1 and tell the journal nothing more): a
// "kubelet" that serves /readyz while the manifest is in place, ready only
// while a read through the manifest's --etcd-servers succeeds with the
// node's API server client certificate (as a real one is not ready without
// its storage), restarted when the manifest changes; and a CRI that lists
// its container while it serves. The real API servers' switch is
// TestOperatorHA's and test/hamove's (kubeadm cluster).

// standInAPIServer runs node n's stand-in until ctx ends; serving tells
// whether it serves now (what the node's fake CRI lists).
func standInAPIServer(ctx context.Context, t *testing.T, n *Node, cert tls.Certificate, serving *atomic.Bool) {
	var (
		srv  *http.Server
		cli  *clientv3.Client
		cur  []byte
		done chan struct{}
	)
	stop := func() {
		if srv == nil {
			return
		}
		serving.Store(false)
		srv.Close()
		<-done
		cli.Close()
		srv, cli, cur = nil, nil, nil
	}
	defer stop()
	for ctx.Err() == nil {
		m, err := os.ReadFile(n.Paths.APIServerManifest())
		switch {
		case err != nil:
			stop() // kubelet stops a static pod whose manifest went away
		case srv == nil || string(m) != string(cur):
			stop() // and restarts one whose manifest changed
			endpoint, _ := staticpod.Flag(m, "etcd-servers")
			c, err := n.Paths.Dial(endpoint)
			if err != nil {
				t.Errorf("stand-in API server: dial %s: %v", endpoint, err)
				return
			}
			l, err := net.Listen("tcp", "127.0.0.1:"+apiserverPortOf(m))
			if err != nil {
				c.Close() // the old one's port not free yet: next round
				break
			}
			mux := http.NewServeMux()
			mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
				rctx, cancel := context.WithTimeout(r.Context(), time.Second)
				defer cancel()
				if _, err := c.Get(rctx, "/registry/readyz", clientv3.WithCountOnly()); err != nil {
					http.Error(w, "storage: "+err.Error(), http.StatusServiceUnavailable)
					return
				}
				w.Header().Set(servesHeader, endpoint)
				fmt.Fprint(w, "ok")
			})
			s := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 5 * time.Second}
			d := make(chan struct{})
			go func() { defer close(d); s.ServeTLS(l, "", "") }()
			srv, cli, cur, done = s, c, m, d
			serving.Store(true)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// apiserverPortOf is the manifest's --secure-port.
func apiserverPortOf(m []byte) string {
	p, _ := staticpod.Flag(m, "secure-port")
	return p
}

// fakeCRI lists the stand-in's container while it serves, to a request
// for kube-apiserver's (etcd's members are the rig's processes, with no
// container); stopping it is the stand-in's own business (the manifest).
type fakeCRI struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	serving *atomic.Bool
}

func (f *fakeCRI) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	name := req.GetFilter().GetLabelSelector()["io.kubernetes.container.name"]
	if !f.serving.Load() || (name != "" && name != "kube-apiserver") {
		return &runtimeapi.ListContainersResponse{}, nil
	}
	return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{{Id: "kube-apiserver-stand-in", State: runtimeapi.ContainerState_CONTAINER_RUNNING,
		Labels: map[string]string{"io.kubernetes.container.name": "kube-apiserver", "io.kubernetes.pod.namespace": "kube-system"}}}}, nil
}

func (f *fakeCRI) StopContainer(context.Context, *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	return &runtimeapi.StopContainerResponse{}, nil
}

func (f *fakeCRI) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{}, nil
}

// startAPIServers gives every rig node its stand-in API server on a port
// of its own and a fake CRI that kubelet's configuration names, until the
// rig stops.
func (r *rig) startAPIServers() {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r.t.Cleanup(cancel) // before the rig's own cleanup waits for r.wg
	certFile, keyFile := filepath.Join(r.dir, "apiserver.crt"), filepath.Join(r.dir, "apiserver.key")
	r.ca.issue(r.t, certFile, keyFile, "kube-apiserver", "127.0.0.1")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		r.t.Fatal(err)
	}
	for i, n := range r.nodes {
		sockDir, err := os.MkdirTemp("", "qk-cri") // a unix socket's path is short
		if err != nil {
			r.t.Fatal(err)
		}
		r.t.Cleanup(func() { os.RemoveAll(sockDir) })
		sock := filepath.Join(sockDir, "cri.sock")
		l, err := net.Listen("unix", sock)
		if err != nil {
			r.t.Fatal(err)
		}
		serving := &atomic.Bool{}
		g := grpc.NewServer()
		runtimeapi.RegisterRuntimeServiceServer(g, &fakeCRI{serving: serving})
		go g.Serve(l)
		cfg := filepath.Join(r.dir, fmt.Sprintf("node%d-kubelet-config.yaml", i+1))
		if err := os.WriteFile(cfg, []byte("containerRuntimeEndpoint: unix://"+sock+"\n"), 0o600); err != nil {
			r.t.Fatal(err)
		}
		n.Paths.KubeletCfg = cfg
		n.ReadyTimeout = 30 * time.Second
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer g.Stop()
			standInAPIServer(ctx, r.t, n, cert, serving)
		}()
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}

// waitAPIServerOn waits until node i's stand-in answers ready on endpoint
// (its manifest names it and the stand-in serves that manifest).
func (r *rig) waitAPIServerOn(i int, endpoint string) error {
	n := r.nodes[i]
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, err := os.ReadFile(n.Paths.APIServerManifest())
		if err == nil {
			if v, _ := staticpod.Flag(m, "etcd-servers"); v == endpoint && apiServerServes(apiserverPortOf(m)) == endpoint {
				return nil
			}
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("not ready on it")
			}
			return fmt.Errorf("node%d's API server is not on %s: %v", i+1, endpoint, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// servesHeader names, in a ready answer, the --etcd-servers of the
// manifest the stand-in serves.
const servesHeader = "X-Stand-In-Etcd-Servers"

// apiServerServes is the storage of the stand-in ready on port, or "".
func apiServerServes(port string) string {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Get("https://127.0.0.1:" + port + "/readyz")
	if err != nil {
		return ""
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return resp.Header.Get(servesHeader)
}
