package images

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/quantyroot/quantykube/internal/runtime/config"
)

// testRegistry is go-containerregistry's in-memory registry behind a front server
// that may demand basic auth, serve TLS, or mount the API under another root. Images
// are pushed through a second, plain server on the same handler (admin), so the
// front's request log holds only what the pulls asked.
type testRegistry struct {
	front *httptest.Server
	admin *httptest.Server
	host  string // the front's host:port

	mu   sync.Mutex
	log  []string // "GET /v2/team/app/manifests/v1?ns=x"
	auth []string // the Authorization header of each request that carried one
}

type regOpt struct {
	user, pass string            // basic auth demanded when user is set
	tls        func(*tls.Config) // serve TLS, configured by this
	root       string            // the API root the front serves instead of /v2
}

func newTestRegistry(t *testing.T, o regOpt) *testRegistry {
	t.Helper()
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	tr := &testRegistry{admin: httptest.NewServer(h)}
	t.Cleanup(tr.admin.Close)
	front := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.mu.Lock()
		line := r.Method + " " + r.URL.Path
		if r.URL.RawQuery != "" {
			line += "?" + r.URL.RawQuery
		}
		tr.log = append(tr.log, line)
		if a := r.Header.Get("Authorization"); a != "" {
			tr.auth = append(tr.auth, a)
		}
		tr.mu.Unlock()
		if o.user != "" {
			u, p, ok := r.BasicAuth()
			if !ok || u != o.user || p != o.pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
		}
		if o.root != "" {
			if r.URL.Path != o.root && !strings.HasPrefix(r.URL.Path, o.root+"/") {
				http.NotFound(w, r)
				return
			}
			r.URL.Path = "/v2" + strings.TrimPrefix(r.URL.Path, o.root)
		}
		h.ServeHTTP(w, r)
	})
	srv := httptest.NewUnstartedServer(front)
	if o.tls != nil {
		srv.TLS = &tls.Config{}
		o.tls(srv.TLS)
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	tr.front = srv
	tr.host = srv.Listener.Addr().String()
	return tr
}

// push stores a small random image under repo:tag and returns it.
func (r *testRegistry) push(t *testing.T, repoTag string) v1.Image {
	t.Helper()
	img, err := random.Image(256, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(strings.TrimPrefix(r.admin.URL, "http://")+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	return img
}

func (r *testRegistry) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

// storeFor opens a store with the registry configuration of a runtime.toml.
func storeFor(t *testing.T, runtimeTOML string) *Store {
	t.Helper()
	c := config.Default()
	if err := config.Parse([]byte(runtimeTOML), &c); err != nil {
		t.Fatalf("runtime.toml: %v\n%s", err, runtimeTOML)
	}
	reg, err := c.Registries()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.TempDir(), reg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("unpacking layers needs root (chown)")
	}
}

func wantPulled(t *testing.T, s *Store, ref string, auth *Auth, img v1.Image) Image {
	t.Helper()
	im, err := s.Pull(context.Background(), ref, auth)
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	want, _ := img.ConfigName()
	if im.ID != want.String() {
		t.Fatalf("pulled %s, want %s", im.ID, want)
	}
	return im
}

func contains(list []string, sub string) bool {
	for _, l := range list {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// TestPullThroughMirrorOfUnresolvableRegistry: a containerd hosts.toml directory names
// a mirror for registry.invalid (a name that never resolves): the pull goes through
// the mirror, which is told the registry (ns=), and the image keeps its upstream name.
// A missing image's error names the registry, the hosts.toml and both endpoints tried.
func TestPullThroughMirrorOfUnresolvableRegistry(t *testing.T) {
	needRoot(t)
	mirror := newTestRegistry(t, regOpt{})
	img := mirror.push(t, "team/app:v1")
	certs := t.TempDir()
	os.MkdirAll(filepath.Join(certs, "registry.invalid"), 0o755)
	hosts := filepath.Join(certs, "registry.invalid", "hosts.toml")
	os.WriteFile(hosts, []byte(fmt.Sprintf("server = \"https://registry.invalid\"\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", mirror.host)), 0o644)
	s := storeFor(t, fmt.Sprintf("[registry]\nconfig_path = %q\n", certs))

	im := wantPulled(t, s, "registry.invalid/team/app:v1", nil, img)
	if len(im.RepoTags) != 1 || im.RepoTags[0] != "registry.invalid/team/app:v1" || !strings.HasPrefix(im.RepoDigests[0], "registry.invalid/team/app@sha256:") {
		t.Fatalf("names %v %v", im.RepoTags, im.RepoDigests)
	}
	if !contains(mirror.requests(), "GET /v2/team/app/manifests/v1?ns=registry.invalid") {
		t.Fatalf("the mirror was not asked with ns=registry.invalid: %v", mirror.requests())
	}

	_, err := s.Pull(context.Background(), "registry.invalid/team/none:v1", nil)
	msg := fmt.Sprint(err)
	for _, want := range []string{"registry.invalid", hosts, "mirror http://" + mirror.host, "upstream https://registry.invalid"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not name %q: %v", want, err)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans lines: %q", msg)
	}
}

// credentialed is a registry that demands basic auth, holding team/app:v1, and the
// runtime.toml namespace that makes it its own upstream over plain HTTP.
func credentialed(t *testing.T) (*testRegistry, v1.Image, string) {
	reg := newTestRegistry(t, regOpt{user: "alice", pass: "s3cret"})
	img := reg.push(t, "team/app:v1")
	return reg, img, fmt.Sprintf("[registry.hosts.%q]\nserver = \"http://%s\"\n", reg.host, reg.host)
}

func authLine(host, user, pass string) string {
	return fmt.Sprintf("[registry.auth.%q]\nusername = %q\npassword = %q\n", host, user, pass)
}

// TestPullWithConfiguredCredentials: a registry that requires credentials refuses an
// anonymous pull (the error names the endpoint) and serves one with registry.auth.
func TestPullWithConfiguredCredentials(t *testing.T) {
	needRoot(t)
	reg, img, ns := credentialed(t)
	ref := reg.host + "/team/app:v1"

	_, err := storeFor(t, ns).Pull(context.Background(), ref, nil)
	if err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "upstream http://"+reg.host) || !strings.Contains(err.Error(), "UNAUTHORIZED") {
		t.Fatalf("anonymous pull: %v", err)
	}
	wantPulled(t, storeFor(t, ns+authLine(reg.host, "alice", "s3cret")), ref, nil, img)
	// The auth form (base64 of user:password), as containerd's configs.<host>.auth.auth.
	enc := base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	wantPulled(t, storeFor(t, ns+fmt.Sprintf("[registry.auth.%q]\nauth = %q\n", reg.host, enc)), ref, nil, img)
}

// TestRequestCredentialsTakePrecedence: for the image's own registry the CRI request's
// credentials (kubelet's, from image pull secrets) win over configured ones, both ways.
func TestRequestCredentialsTakePrecedence(t *testing.T) {
	needRoot(t)
	reg, img, ns := credentialed(t)
	ref := reg.host + "/team/app:v1"

	wrongConf := storeFor(t, ns+authLine(reg.host, "alice", "stale"))
	wantPulled(t, wrongConf, ref, &Auth{Username: "alice", Password: "s3cret"}, img)
	wantPulled(t, storeFor(t, ns+authLine(reg.host, "alice", "stale")), ref,
		&Auth{Auth: base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))}, img)

	rightConf := storeFor(t, ns+authLine(reg.host, "alice", "s3cret"))
	if _, err := rightConf.Pull(context.Background(), ref, &Auth{Username: "mallory", Password: "x"}); err == nil {
		t.Fatal("the request's (wrong) credentials did not take precedence over the configured ones")
	}
	// Credentials for another server (ServerAddress) are not the request's for this one.
	wantPulled(t, storeFor(t, ns+authLine(reg.host, "alice", "s3cret")), ref,
		&Auth{Username: "mallory", Password: "x", ServerAddress: "https://elsewhere.example"}, img)
}

// TestMirrorUsesItsOwnCredentials: a mirror that demands its own credentials gets
// registry.auth's entry for its host, not the request's (which are for the registry).
func TestMirrorUsesItsOwnCredentials(t *testing.T) {
	needRoot(t)
	mirror := newTestRegistry(t, regOpt{user: "mirror", pass: "m1rr0r"})
	img := mirror.push(t, "team/app:v1")
	doc := fmt.Sprintf("[registry.hosts.\"registry.invalid\"]\nskip_upstream = true\n[registry.hosts.\"registry.invalid\".host.\"http://%s\"]\n", mirror.host)
	pod := &Auth{Username: "pod", Password: "secret-for-registry.invalid"}
	if _, err := storeFor(t, doc).Pull(context.Background(), "registry.invalid/team/app:v1", pod); err == nil {
		t.Fatal("the mirror accepted the registry's credentials")
	}
	wantPulled(t, storeFor(t, doc+authLine(mirror.host, "mirror", "m1rr0r")), "registry.invalid/team/app:v1", pod, img)
}

// TestPullOnlyMirrorFetchesByDigest: a mirror with only the pull capability is never
// asked to resolve a tag; the upstream resolves it and the mirror serves the content
// by digest, first.
func TestPullOnlyMirrorFetchesByDigest(t *testing.T) {
	needRoot(t)
	upstream, mirror := newTestRegistry(t, regOpt{}), newTestRegistry(t, regOpt{})
	img := upstream.push(t, "team/app:v1")
	if err := remote.Write(mustRef(t, strings.TrimPrefix(mirror.admin.URL, "http://")+"/team/app:v1"), img); err != nil {
		t.Fatal(err)
	}
	s := storeFor(t, fmt.Sprintf(`[registry.hosts.%q]
server = "http://%s"
[registry.hosts.%q.host."http://%s"]
capabilities = ["pull"]
`, upstream.host, upstream.host, upstream.host, mirror.host))
	wantPulled(t, s, upstream.host+"/team/app:v1", nil, img)
	d, _ := img.Digest()
	if contains(mirror.requests(), "/manifests/v1") || !contains(mirror.requests(), "/manifests/"+d.String()) || !contains(mirror.requests(), "/blobs/") {
		t.Fatalf("mirror requests %v", mirror.requests())
	}
	if !contains(upstream.requests(), "/manifests/v1") || contains(upstream.requests(), "/blobs/") {
		t.Fatalf("upstream requests %v", upstream.requests())
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	r, err := name.ParseReference(s, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMirrorPathAndOverridePath: a mirror URL's path is the parent of its /v2 root;
// with override_path it is the root itself.
func TestMirrorPathAndOverridePath(t *testing.T) {
	needRoot(t)
	prefixed := newTestRegistry(t, regOpt{root: "/cache/v2"})
	img := prefixed.push(t, "team/app:v1")
	nonCompliant := newTestRegistry(t, regOpt{root: "/api"})
	img2 := nonCompliant.push(t, "team/other:v1")
	s := storeFor(t, fmt.Sprintf(`[registry.hosts."registry.invalid"]
skip_upstream = true
[registry.hosts."registry.invalid".host."http://%s/cache"]
[registry.hosts."registry.invalid".host."http://%s/api"]
override_path = true
`, prefixed.host, nonCompliant.host))
	wantPulled(t, s, "registry.invalid/team/app:v1", nil, img)
	wantPulled(t, s, "registry.invalid/team/other:v1", nil, img2)
	if !contains(nonCompliant.requests(), "GET /api/team/other/manifests/v1") {
		t.Fatalf("override_path requests %v", nonCompliant.requests())
	}
}

// TestTLSEndpoints: a mirror with its own CA (ca), one reached with skip_verify, one
// that demands a client certificate (client), and an https:// mirror that is really
// plain HTTP, which is refused instead of downgraded.
func TestTLSEndpoints(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	ca := newTestCA(t)
	tlsMirror := newTestRegistry(t, regOpt{tls: func(c *tls.Config) {}})
	img := tlsMirror.push(t, "team/app:v1")
	caFile := filepath.Join(dir, "mirror-ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsMirror.front.Certificate().Raw}), 0o644)
	ns := func(url, extra string) string {
		return fmt.Sprintf("[registry.hosts.\"registry.invalid\"]\nskip_upstream = true\n[registry.hosts.\"registry.invalid\".host.%q]\n%s\n", url, extra)
	}
	ref := "registry.invalid/team/app:v1"
	if _, err := storeFor(t, ns("https://"+tlsMirror.host, "")).Pull(context.Background(), ref, nil); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an unknown CA was trusted: %v", err)
	}
	wantPulled(t, storeFor(t, ns("https://"+tlsMirror.host, fmt.Sprintf("ca = %q", caFile))), ref, nil, img)
	wantPulled(t, storeFor(t, ns("https://"+tlsMirror.host, "skip_verify = true")), ref, nil, img)

	mtls := newTestRegistry(t, regOpt{tls: func(c *tls.Config) {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, ca.pool
	}})
	img2 := mtls.push(t, "team/app:v1")
	mtlsCA := filepath.Join(dir, "mtls-ca.pem")
	os.WriteFile(mtlsCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: mtls.front.Certificate().Raw}), 0o644)
	certFile, keyFile := ca.issueClient(t, dir)
	if _, err := storeFor(t, ns("https://"+mtls.host, fmt.Sprintf("ca = %q", mtlsCA))).Pull(context.Background(), ref, nil); err == nil {
		t.Fatal("a pull without the client certificate succeeded")
	}
	wantPulled(t, storeFor(t, ns("https://"+mtls.host, fmt.Sprintf("ca = %q\nclient = [[%q, %q]]", mtlsCA, certFile, keyFile))), ref, nil, img2)

	plain := newTestRegistry(t, regOpt{})
	plain.push(t, "team/app:v1")
	_, err := storeFor(t, ns("https://"+plain.host, "")).Pull(context.Background(), ref, nil)
	if err == nil || contains(plain.requests(), "/manifests/") {
		t.Fatalf("an https:// mirror fell back to plain HTTP: %v %v", err, plain.requests())
	}
}

// testCA signs client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issueClient writes a client certificate and key signed by the CA into dir.
func (ca *testCA) issueClient(t *testing.T, dir string) (string, string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "node"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "client.cert"), filepath.Join(dir, "client.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}

// TestCredentialsFor pins the precedence table without a registry.
func TestCredentialsFor(t *testing.T) {
	rc := &config.Registry{Auth: map[string]config.Credentials{
		"registry-1.docker.io": {Username: "hub"}, "mirror.example": {Username: "mirror"}, "ghcr.io": {Username: "conf"}}}
	cri := &Auth{Username: "pod"}
	user := func(a authn.Authenticator) string {
		c, _ := a.Authorization()
		return c.Username
	}
	for _, tc := range []struct {
		host, reg string
		cri       *Auth
		want      string
	}{
		{"ghcr.io", "ghcr.io", cri, "pod"},                                                   // the registry's own: the request wins
		{"ghcr.io", "ghcr.io", nil, "conf"},                                                  // else configured
		{"index.docker.io", "docker.io", nil, "hub"},                                         // Docker Hub's names find each other
		{"index.docker.io", "docker.io", cri, "pod"},                                         // and the request still wins there
		{"mirror.example", "ghcr.io", cri, "mirror"},                                         // a mirror: its own first
		{"other-mirror.example", "ghcr.io", cri, "pod"},                                      // a mirror without its own: the request's
		{"other-mirror.example", "ghcr.io", nil, ""},                                         // or none
		{"quay.io", "quay.io", &Auth{Username: "pod", ServerAddress: "https://ghcr.io"}, ""}, // meant for another server
	} {
		a, _ := credentialsFor(tc.host, tc.reg, tc.cri, rc)
		if got := user(a); got != tc.want {
			t.Errorf("%s for %s with %+v: %q, want %q", tc.host, tc.reg, tc.cri, got, tc.want)
		}
	}
}

// TestEndpointTransport pins the rewriting of one endpoint's requests.
func TestEndpointTransport(t *testing.T) {
	var got []string
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.URL.String()+" "+r.Header.Get("X-A"))
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})
	et := &endpointTransport{next: next, host: "m:5000", root: "/v2/upstream", ns: "docker.io", header: http.Header{"X-A": {"1"}}, httpsOnly: true}
	for _, u := range []string{"https://m:5000/v2/", "https://m:5000/v2/upstream/lib/x/blobs/sha256:1", "https://token.example/v2/token", "http://m:5000/v2/"} {
		req, _ := http.NewRequest("GET", u, nil)
		if _, err := et.RoundTrip(req); err != nil {
			got = append(got, "refused "+u)
		}
	}
	want := []string{"https://m:5000/v2/upstream/?ns=docker.io 1", "https://m:5000/v2/upstream/lib/x/blobs/sha256:1?ns=docker.io 1",
		"https://token.example/v2/token ", "refused http://m:5000/v2/"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
