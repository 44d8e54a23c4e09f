package images

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/quantyroot/quantykube/internal/runtime/config"
)

// Auth is registry credentials from the CRI request (what kubelet sends from a pod's
// image pull secrets). ServerAddress, when set, limits them to that host.
type Auth struct {
	Username, Password, Auth, IdentityToken, RegistryToken, ServerAddress string
}

func (a *Auth) empty() bool {
	return a == nil || a.Username == "" && a.Password == "" && a.Auth == "" && a.IdentityToken == "" && a.RegistryToken == ""
}

// endpoint is one place a pull tries (config.Endpoint) and how go-containerregistry
// reaches it: the transport and the credentials of that endpoint.
type endpoint struct {
	config.Endpoint
	opts []remote.Option
	// creds says which credentials go to it, for logs: "request", "configured", "none".
	creds string
	// done releases the endpoint's own idle connections (a transport made for it).
	done func()
}

// newEndpoint prepares e for pulls of the image registry reg, with the request's
// credentials cri (may be nil) and the configured ones in rc.
func newEndpoint(e config.Endpoint, reg string, cri *Auth, rc *config.Registry) (endpoint, error) {
	ep := endpoint{Endpoint: e, done: func() {}}
	var rt http.RoundTripper = remote.DefaultTransport
	tlsConf, err := e.TLSConfig()
	if err != nil {
		return ep, err
	}
	if tlsConf != nil || e.DialTimeout > 0 {
		base, ok := remote.DefaultTransport.(*http.Transport)
		if !ok {
			base = http.DefaultTransport.(*http.Transport)
		}
		tr := base.Clone()
		if tlsConf != nil {
			tr.TLSClientConfig = tlsConf
		}
		if e.DialTimeout > 0 {
			tr.DialContext = (&net.Dialer{Timeout: e.DialTimeout, KeepAlive: 30 * time.Second}).DialContext
		}
		rt, ep.done = tr, tr.CloseIdleConnections
	}
	et := &endpointTransport{next: rt, host: e.Host(), root: e.URL.Path, header: e.Header, httpsOnly: !e.Implicit && !e.PlainHTTP()}
	if e.Mirror {
		et.ns = reg
	}
	if et.root != "/v2" || len(et.header) > 0 || et.ns != "" || et.httpsOnly {
		rt = et
	}
	a, creds := credentialsFor(e.Host(), reg, cri, rc)
	ep.creds = creds
	ep.opts = []remote.Option{remote.WithTransport(rt), remote.WithAuth(a)}
	return ep, nil
}

// credentialsFor picks the credentials sent to host when pulling from registry reg.
// For the image's own registry the request's credentials win over configured ones
// (as containerd's CRI plugin does); a mirror uses its own configured credentials
// first and the request's otherwise (a mirror that fronts the same registry may take
// them; one that needs none is never challenged, so is never sent any).
func credentialsFor(host, reg string, cri *Auth, rc *config.Registry) (authn.Authenticator, string) {
	useCRI := !cri.empty() && (cri.ServerAddress == "" || sameRegistry(serverHost(cri.ServerAddress), host))
	conf, haveConf := rc.Credentials(host)
	switch {
	case useCRI && sameRegistry(host, reg):
		return cri.authenticator(), "request"
	case haveConf:
		return authn.FromConfig(authn.AuthConfig{Username: conf.Username, Password: conf.Password, Auth: conf.Auth,
			IdentityToken: conf.IdentityToken}), "configured"
	case useCRI:
		return cri.authenticator(), "request"
	}
	return authn.Anonymous, "none"
}

func (a *Auth) authenticator() authn.Authenticator {
	return authn.FromConfig(authn.AuthConfig{Username: a.Username, Password: a.Password, Auth: a.Auth,
		IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken})
}

// sameRegistry: equal hosts, or two of Docker Hub's names.
func sameRegistry(a, b string) bool {
	return a == b || config.IsDockerHub(a) && config.IsDockerHub(b)
}

// serverHost is the host of a CRI ServerAddress ("https://ghcr.io", "ghcr.io").
func serverHost(s string) string {
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		return u.Host
	}
	return strings.TrimSuffix(s, "/")
}

// endpointTransport adapts go-containerregistry's requests to one configured
// endpoint. Only requests to that host are changed (a token service or a blob
// redirect elsewhere is left alone):
//   - an API root other than /v2 (a mirror's path, or override_path) replaces the /v2
//     prefix; a path already under the root is kept (a redirect from the registry);
//   - a mirror's requests carry ns=<registry> (containerd's convention, for mirrors
//     serving several registries);
//   - configured headers are added;
//   - an endpoint configured as https:// never falls back to plain HTTP (which
//     go-containerregistry would try for private addresses).
type endpointTransport struct {
	next      http.RoundTripper
	host      string
	root      string
	ns        string
	header    http.Header
	httpsOnly bool
}

func (t *endpointTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != t.host {
		return t.next.RoundTrip(req)
	}
	if t.httpsOnly && req.URL.Scheme == "http" {
		return nil, fmt.Errorf("%s is configured as https://: not falling back to plain HTTP (write http:// to allow it)", t.host)
	}
	req = req.Clone(req.Context())
	p := req.URL.Path
	under := func(root string) bool { return p == root || strings.HasPrefix(p, root+"/") }
	if t.root != "/v2" && under("/v2") && (t.root == "" || !under(t.root)) {
		req.URL.Path, req.URL.RawPath = t.root+strings.TrimPrefix(p, "/v2"), ""
	}
	if t.ns != "" {
		q := req.URL.Query()
		q.Set("ns", t.ns)
		req.URL.RawQuery = q.Encode()
	}
	for k, vs := range t.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	return t.next.RoundTrip(req)
}
