package storee2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kubeReadyTimeout bounds kube-apiserver's start (it is slow on a busy 2-core machine).
const kubeReadyTimeout = 3 * time.Minute

// kubeAPI is a kube-apiserver on a server under test, with an admin identity.
type kubeAPI struct {
	URL        string
	Kubeconfig string
	proc       *bgProc
	logPath    string
	pki        *pki
	admin      keyPair
}

// startKubeAPIServer runs kube-apiserver against s over TLS with client-cert
// auth and waits until /readyz answers 200.
func startKubeAPIServer(t *testing.T, bin string, s *server, eventTTL, compaction time.Duration) *kubeAPI {
	t.Helper()
	dir := t.TempDir()
	p := newPKI(t, filepath.Join(dir, "pki"), "kubernetes-ca")
	serving := p.issue(t, "apiserver", certSpec{
		CN:     "kube-apiserver",
		IPs:    []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		DNS:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		Server: true,
	})
	admin := p.issue(t, "admin", certSpec{CN: "qk-admin", Orgs: []string{"system:masters"}, Client: true})
	saKey, saPub := rsaKeyPair(t, filepath.Join(dir, "pki"), "sa")
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	k := &kubeAPI{
		URL:        "https://" + addr,
		Kubeconfig: filepath.Join(dir, "admin.kubeconfig"),
		logPath:    filepath.Join(dir, "kube-apiserver.log"),
		pki:        p,
		admin:      admin,
	}
	writeKubeconfig(t, k.Kubeconfig, k.URL, p.CAFile, admin)
	args := []string{
		"--etcd-servers=" + etcdServers(s),
		"--etcd-cafile=" + s.PKI.CAFile,
		"--etcd-certfile=" + s.ClientPair.Cert,
		"--etcd-keyfile=" + s.ClientPair.Key,
		"--bind-address=127.0.0.1",
		"--secure-port=" + port,
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--tls-cert-file=" + serving.Cert,
		"--tls-private-key-file=" + serving.Key,
		"--client-ca-file=" + p.CAFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saPub,
		"--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--endpoint-reconciler-type=none", // a loopback advertise address is not a valid endpoint
		"--event-ttl=" + eventTTL.String(),
		"--etcd-compaction-interval=" + compaction.String(),
		"--shutdown-watch-termination-grace-period=2s",
		"--profiling=false",
	}
	k.proc = startBg(t, "kube-apiserver", k.logPath, bin, args...)
	t.Cleanup(func() {
		if t.Failed() {
			dumpFileTail(t, "kube-apiserver log (more)", k.logPath, 250)
		}
	})
	k.waitReady(t)
	return k
}

// writeKubeconfig writes an admin kubeconfig for server.
func writeKubeconfig(t *testing.T, path, server, caFile string, user keyPair) {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: qk
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: qk
  context:
    cluster: qk
    user: admin
current-context: qk
`, server, caFile, user.Cert, user.Key)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatalf("write kubeconfig %s: %v", path, err)
	}
}

// waitReady polls /readyz until 200, the process exits, or kubeReadyTimeout.
func (k *kubeAPI) waitReady(t *testing.T) {
	t.Helper()
	hc := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: clientTLS(t, k.pki.CAFile, &k.admin)},
	}
	defer hc.CloseIdleConnections()
	start := time.Now()
	last := "no answer yet"
	for time.Since(start) < kubeReadyTimeout {
		if k.proc.Exited() {
			t.Fatalf("kube-apiserver exited before it was ready (last /readyz: %s)", last)
		}
		resp, err := hc.Get(k.URL + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Logf("kube-apiserver ready in %v", time.Since(start).Round(time.Millisecond))
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, lastLines(string(body), 6))
		} else {
			last = err.Error()
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("kube-apiserver not ready after %v; last /readyz: %s", kubeReadyTimeout, last)
}

// lastLines keeps the last n lines of s (readyz bodies list every check).
func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " | ")
}

// kubectl runs kubectl as the admin of one kube-apiserver.
type kubectl struct {
	t          *testing.T
	bin        string
	kubeconfig string
}

func (k *kubectl) run(stdin string, args ...string) cmdResult {
	base := []string{"--kubeconfig", k.kubeconfig, "--request-timeout=30s"}
	return runCmd(stdin, k.bin, []string{"KUBECONFIG="}, append(base, args...)...)
}

// ok runs kubectl and fails the test unless it succeeds; it returns stdout.
func (k *kubectl) ok(args ...string) string {
	k.t.Helper()
	return k.okIn("", args...)
}

func (k *kubectl) okIn(stdin string, args ...string) string {
	k.t.Helper()
	r := k.run(stdin, args...)
	if r.Err != nil {
		k.t.Fatalf("kubectl %s failed:\n%s", strings.Join(args, " "), r)
	}
	return r.Stdout
}

// expect runs kubectl and compares trimmed stdout with want.
func (k *kubectl) expect(want string, args ...string) {
	k.t.Helper()
	if got := strings.TrimSpace(k.ok(args...)); got != want {
		k.t.Fatalf("kubectl %s:\n got %q\nwant %q", strings.Join(args, " "), got, want)
	}
}

// notFound reports whether kubectl get ARGS says the object does not exist;
// any other failure fails the test.
func (k *kubectl) notFound(args ...string) bool {
	k.t.Helper()
	r := k.run("", append([]string{"get"}, args...)...)
	if r.Err == nil {
		return false
	}
	if strings.Contains(r.Stderr, "NotFound") || strings.Contains(r.Stderr, "not found") {
		return true
	}
	k.t.Fatalf("kubectl get %s failed:\n%s", strings.Join(args, " "), r)
	return false
}

// eventually polls cond every interval until it is true or timeout passes.
func eventually(ctx context.Context, timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(interval)
	}
}

// etcdServers is kube-apiserver's --etcd-servers for s: its client URL, or,
// when s is a member of a cluster (QK_STORE_MEMBERS=3), every member's, as a
// kubeadm control plane with stacked etcd is configured.
func etcdServers(s *server) string {
	if s.cluster == nil {
		return s.ClientURL
	}
	return strings.Join(s.cluster.Endpoints(), ",")
}
