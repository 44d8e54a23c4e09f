package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Registry is the [registry] table: where the pulls of each registry host go, in which
// order, with which TLS settings and credentials. It follows containerd's hosts.toml
// model (containerd's docs/hosts.md): a registry host's *namespace* lists mirrors
// (`host` entries, tried in the order written) and then its `server` (the upstream).
//
// The zero value is the behaviour from before it existed: an image is pulled from its
// own registry over HTTPS (plain HTTP only where go-containerregistry falls back for
// localhost and private addresses), anonymously unless the CRI request carries
// credentials.
//
// Lookup of a registry host's namespace (first match wins): Hosts[host], Hosts["_default"],
// then for each directory of ConfigPath in order: <dir>/<host_port_>, <dir>/<host:port>
// (or <dir>/<host>), <dir>/_default. A namespace that is found is used whole; nothing
// is merged across places.
type Registry struct {
	// ConfigPath is a colon-separated list of directories holding one directory per
	// registry host in containerd's layout: <dir>/<host>/hosts.toml, or, without a
	// hosts.toml, Docker's certificate files (*.crt: CAs; *.cert with *.key: client
	// pairs). Example: "/etc/containerd/certs.d". The files are read at every pull, so a
	// change applies without a restart. Unknown keys in a hosts.toml fail its pulls.
	ConfigPath string `toml:"config_path"`
	// Hosts are namespaces written in this file, keyed by registry host ("docker.io",
	// "registry.example.com:5000", or "_default" for any host without its own). Each
	// takes the keys of a hosts.toml, plus skip_upstream.
	Hosts map[string]Namespace `toml:"hosts"`
	// Auth are credentials keyed by the host they are sent to: a registry's or a
	// mirror's host[:port] (as containerd's registry.configs.<host>.auth). For an
	// image's own registry, credentials in the CRI request (the pod's image pull
	// secret) take precedence; a mirror uses its own entry here first.
	Auth map[string]Credentials `toml:"auth"`
}

// Namespace is one registry host's configuration: the keys of a containerd hosts.toml.
// Its top-level HostConfig applies to Server.
type Namespace struct {
	// Server is the upstream, tried after every mirror: "https://registry.example.com",
	// a bare host (https), or "http://..." for plain HTTP. Default: the registry host
	// itself over HTTPS. To pull from one mirror and never the upstream, set the
	// mirror as the server.
	Server string `toml:"server"`
	HostConfig
	// Host are the mirrors (containerd's `[host."https://mirror"]` tables), tried in
	// the order they are written, before Server. A URL path is the API root's parent
	// ("https://m/us" → https://m/us/v2/...), or the API root itself with override_path.
	// A request to a mirror carries ns=<registry host> in its query, as containerd's do.
	Host map[string]HostConfig `toml:"host"`
	// SkipUpstream leaves Server out: only the mirrors are tried (offline nodes,
	// tests). runtime.toml only; in a hosts.toml set the last mirror as server.
	SkipUpstream bool `toml:"skip_upstream"`

	// Order lists Host's keys in the order they are tried. Parse fills it from the
	// file's order; code that builds a Namespace sets it.
	Order []string `toml:"-"`
}

// HostConfig is the per-endpoint part of a namespace (containerd's hosts.toml fields).
type HostConfig struct {
	// Capabilities of this endpoint among "pull" (fetch content by digest), "resolve"
	// (turn a tag into a digest) and "push" (never used by a runtime). Default: all.
	// A public mirror should be ["pull"]: tags are then resolved by a trusted host.
	Capabilities []string `toml:"capabilities"`
	// CA is a path or a list of paths of PEM CA certificates trusted besides the
	// system's (relative paths in a hosts.toml are relative to its directory).
	CA any `toml:"ca"`
	// Client is the TLS client certificate: a path (certificate and key in one PEM
	// file), a list of such paths, or a list of [certificate, key] pairs.
	Client any `toml:"client"`
	// SkipVerify skips verification of the endpoint's certificate chain and name.
	SkipVerify *bool `toml:"skip_verify"`
	// OverridePath says the URL's path is the API root itself (registries without the
	// /v2 prefix); otherwise /v2 is appended to it.
	OverridePath bool `toml:"override_path"`
	// Header are extra HTTP headers sent to this endpoint: name = "value" or ["v1", "v2"].
	Header map[string]any `toml:"header"`
	// DialTimeout bounds a connection attempt ("1s"); default 30s. A short one makes
	// an unreachable mirror fall through to the next endpoint sooner.
	DialTimeout string `toml:"dial_timeout"`
}

// Credentials are one host's credentials, as in a Docker config.json: username and
// password, or auth (base64 of "username:password"), or identitytoken (an OAuth2
// refresh token exchanged at the registry's token service).
type Credentials struct {
	Username      string `toml:"username"`
	Password      string `toml:"password"`
	Auth          string `toml:"auth"`
	IdentityToken string `toml:"identitytoken"`
}

// DefaultNamespace is the namespace name used for any registry host without its own.
const DefaultNamespace = "_default"

// Capability bits of an Endpoint.
const (
	CapPull    = 1 << iota // fetch manifests by digest and blobs
	CapResolve             // turn a tag into a digest
	CapPush                // accepted in files, never used
)

func (c Credentials) empty() bool { return c == Credentials{} }

// validate reports the first unusable credential, naming the fix.
func (c Credentials) validate(host string) error {
	if err := c.Check(); err != nil {
		return fmt.Errorf("registry.auth.%q %w", host, err)
	}
	return nil
}

// Check says whether c is one usable form of credentials; its error completes a
// sentence that names the setting ("registry.auth.\"ghcr.io\" " + err).
func (c Credentials) Check() error {
	forms := 0
	for _, set := range []bool{c.Username != "" || c.Password != "", c.Auth != "", c.IdentityToken != ""} {
		if set {
			forms++
		}
	}
	switch {
	case forms == 0:
		return errors.New("is empty: set username and password, auth, or identitytoken")
	case forms > 1:
		return errors.New("mixes credential forms: keep one of username/password, auth, identitytoken")
	case c.Password != "" && c.Username == "":
		return errors.New("has a password without a username: add username")
	case c.Auth != "":
		b, err := base64.StdEncoding.DecodeString(c.Auth)
		if err != nil || !strings.Contains(string(b), ":") {
			return errors.New("has an auth that is not base64 of \"username:password\" (as in a Docker config.json): fix it")
		}
	}
	return nil
}

// Credentials returns the configured credentials for host (a registry's or a mirror's
// host[:port]); Docker Hub's names (docker.io, index.docker.io, registry-1.docker.io)
// find each other's entry.
func (r *Registry) Credentials(host string) (Credentials, bool) {
	if c, ok := r.Auth[host]; ok {
		return c, true
	}
	if IsDockerHub(host) {
		for _, alias := range dockerHubHosts {
			if c, ok := r.Auth[alias]; ok {
				return c, true
			}
		}
	}
	return Credentials{}, false
}

var dockerHubHosts = []string{"docker.io", "registry-1.docker.io", "index.docker.io"}

// IsDockerHub says whether host is one of Docker Hub's registry names.
func IsDockerHub(host string) bool { return slices.Contains(dockerHubHosts, host) }

// validate checks the table's own values (not the files under ConfigPath: Check does).
func (r *Registry) validate() error {
	for _, d := range filepath.SplitList(r.ConfigPath) {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("registry.config_path: %q must be an absolute directory", d)
		}
	}
	for host, c := range r.Auth {
		if err := validHostName(host); err != nil {
			return fmt.Errorf("registry.auth.%q: %w", host, err)
		}
		if err := c.validate(host); err != nil {
			return err
		}
	}
	for ns, n := range r.Hosts {
		where := fmt.Sprintf("registry.hosts.%q", ns)
		if ns != DefaultNamespace {
			if err := validHostName(ns); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
		}
		if _, err := n.endpoints(ns, "", where); err != nil {
			return err
		}
	}
	return nil
}

// validHostName accepts host or host:port, without scheme or path.
func validHostName(h string) error {
	u, err := url.Parse("//" + h)
	if err != nil || u.Host != h || h == "" {
		return fmt.Errorf("%q is not a host[:port] (no scheme, no path)", h)
	}
	return nil
}

// Endpoint is one place a pull may go, resolved from a namespace.
type Endpoint struct {
	// URL is scheme://host[:port] and, as its path, the API root ("/v2" by default).
	URL url.URL
	// Mirror is true for a `host` entry, false for the namespace's server (upstream).
	Mirror bool
	// Implicit marks the default upstream (no server configured): go-containerregistry
	// chooses the scheme as it always did (HTTPS; HTTP fallback for localhost and
	// private addresses).
	Implicit     bool
	Capabilities int
	CAFiles      []string
	ClientPairs  [][2]string // [certificate, key]; an empty key means the key is in the certificate file
	SkipVerify   bool
	Header       http.Header
	DialTimeout  time.Duration
}

// Host is the endpoint's host[:port].
func (e Endpoint) Host() string { return e.URL.Host }

// PlainHTTP says requests go over plain HTTP.
func (e Endpoint) PlainHTTP() bool { return e.URL.Scheme == "http" }

// Has says whether the endpoint has capability c (CapPull, CapResolve).
func (e Endpoint) Has(c int) bool { return e.Capabilities&c != 0 }

// String names the endpoint in messages: "mirror http://10.0.0.5:5000", "upstream
// https://ghcr.io"; the API root is shown only when it is not /v2.
func (e Endpoint) String() string {
	kind := "upstream"
	if e.Mirror {
		kind = "mirror"
	}
	s := kind + " " + e.URL.Scheme + "://" + e.URL.Host
	if e.URL.Path != "/v2" {
		s += e.URL.Path
	}
	return s
}

// Route is where the pulls of one registry host go: its endpoints in order.
type Route struct {
	// Registry is the image's registry host ("docker.io").
	Registry string
	// Source names where the namespace came from, for messages: `runtime.toml
	// registry.hosts."docker.io"`, "/etc/containerd/certs.d/docker.io/hosts.toml", or
	// "" for the default (no configuration for this host).
	Source    string
	Endpoints []Endpoint
}

// endpoints resolves n (the namespace of registry host ns, or _default) into its
// endpoints: the mirrors in order, then the server unless SkipUpstream. dir makes
// relative certificate paths absolute ("" allows only absolute ones); where names
// the namespace in errors.
func (n Namespace) endpoints(ns, dir, where string) ([]Endpoint, error) {
	if len(n.Order) != len(n.Host) {
		return nil, fmt.Errorf("%s: the order of its mirrors is unknown (a Namespace built in code must set Order)", where)
	}
	var out []Endpoint
	for _, h := range n.Order {
		hc, ok := n.Host[h]
		if !ok {
			return nil, fmt.Errorf("%s: Order names %q, which is not one of its hosts", where, h)
		}
		e, err := hc.endpoint(h, dir)
		if err != nil {
			return nil, fmt.Errorf("%s: host %q: %w", where, h, err)
		}
		e.Mirror = true
		out = append(out, e)
	}
	if n.SkipUpstream {
		if len(out) == 0 {
			return nil, fmt.Errorf("%s: skip_upstream without a mirror leaves nowhere to pull from: add a host or drop skip_upstream", where)
		}
		if n.Server != "" {
			return nil, fmt.Errorf("%s: skip_upstream and server contradict each other: drop one", where)
		}
		return out, nil
	}
	server, implicit := n.Server, n.Server == ""
	if implicit {
		// The registry host itself; for _default, Route puts the image's registry here.
		server = "https://" + ns
	}
	e, err := n.HostConfig.endpoint(server, dir)
	if err != nil {
		return nil, fmt.Errorf("%s: server %q: %w", where, n.Server, err)
	}
	if implicit {
		// containerd gives the default upstream every capability; so do we.
		e.Implicit, e.Capabilities = true, CapPull|CapResolve|CapPush
	}
	return append(out, e), nil
}

// endpoint builds the Endpoint of raw (a URL or bare host) with hc's settings.
func (hc HostConfig) endpoint(raw, dir string) (Endpoint, error) {
	s := raw
	if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
		if strings.Contains(s, "://") {
			return Endpoint{}, fmt.Errorf("scheme must be http or https")
		}
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return Endpoint{}, fmt.Errorf("%q is not a registry URL like https://mirror.example.com[:port][/path]", raw)
	}
	switch {
	case u.Path == "" && hc.OverridePath:
		u.Path = ""
	case u.Path == "" || u.Path == "/":
		u.Path = "/v2"
	default:
		u.Path = path.Clean(u.Path)
		if !hc.OverridePath && !strings.HasSuffix(u.Path, "/v2") {
			u.Path += "/v2"
		}
	}
	e := Endpoint{URL: url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}}
	if len(hc.Capabilities) == 0 {
		e.Capabilities = CapPull | CapResolve | CapPush
	}
	for _, c := range hc.Capabilities {
		switch strings.ToLower(c) {
		case "pull":
			e.Capabilities |= CapPull
		case "resolve":
			e.Capabilities |= CapResolve
		case "push":
			e.Capabilities |= CapPush
		default:
			return Endpoint{}, fmt.Errorf("capability %q is not one of pull, resolve, push", c)
		}
	}
	if hc.SkipVerify != nil {
		e.SkipVerify = *hc.SkipVerify
	}
	if e.CAFiles, err = pathList(hc.CA, dir, "ca"); err != nil {
		return Endpoint{}, err
	}
	if e.ClientPairs, err = clientPairs(hc.Client, dir); err != nil {
		return Endpoint{}, err
	}
	if e.Header, err = headers(hc.Header); err != nil {
		return Endpoint{}, err
	}
	if hc.DialTimeout != "" {
		if e.DialTimeout, err = time.ParseDuration(hc.DialTimeout); err != nil || e.DialTimeout <= 0 {
			return Endpoint{}, fmt.Errorf("dial_timeout %q is not a positive duration like \"5s\"", hc.DialTimeout)
		}
	}
	return e, nil
}

// pathList reads a path-or-list-of-paths value.
func pathList(v any, dir, key string) ([]string, error) {
	var raw []string
	switch t := v.(type) {
	case nil:
		return nil, nil
	case string:
		raw = []string{t}
	case []any:
		for _, x := range t {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("%s must be a path or a list of paths", key)
			}
			raw = append(raw, s)
		}
	default:
		return nil, fmt.Errorf("%s must be a path or a list of paths", key)
	}
	out := make([]string, 0, len(raw))
	for _, p := range raw {
		ap, err := absPath(p, dir, key)
		if err != nil {
			return nil, err
		}
		out = append(out, ap)
	}
	return out, nil
}

// clientPairs reads client = "cert.pem" | ["a.pem", "b.pem"] | [["a.cert", "a.key"], ...].
func clientPairs(v any, dir string) ([][2]string, error) {
	bad := errors.New(`client must be a path, a list of paths, or a list of ["cert", "key"] pairs`)
	var items []any
	switch t := v.(type) {
	case nil:
		return nil, nil
	case string:
		items = []any{t}
	case []any:
		items = t
	default:
		return nil, bad
	}
	var out [][2]string
	for _, it := range items {
		var pair [2]string
		switch t := it.(type) {
		case string:
			pair[0] = t
		case []any:
			if len(t) != 2 {
				return nil, bad
			}
			for i := range t {
				s, ok := t[i].(string)
				if !ok {
					return nil, bad
				}
				pair[i] = s
			}
		default:
			return nil, bad
		}
		for i := range pair {
			if pair[i] == "" {
				continue
			}
			ap, err := absPath(pair[i], dir, "client")
			if err != nil {
				return nil, err
			}
			pair[i] = ap
		}
		if pair[0] == "" {
			return nil, bad
		}
		out = append(out, pair)
	}
	return out, nil
}

func absPath(p, dir, key string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%s has an empty path", key)
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	if dir == "" {
		return "", fmt.Errorf("%s path %q must be absolute", key, p)
	}
	return filepath.Join(dir, p), nil
}

// headers reads header = { name = "v" | ["v1", "v2"] }.
func headers(m map[string]any) (http.Header, error) {
	if len(m) == 0 {
		return nil, nil
	}
	h := http.Header{}
	for k, v := range m {
		switch t := v.(type) {
		case string:
			h.Add(k, t)
		case []any:
			for _, x := range t {
				s, ok := x.(string)
				if !ok {
					return nil, fmt.Errorf("header %q must be a string or a list of strings", k)
				}
				h.Add(k, s)
			}
		default:
			return nil, fmt.Errorf("header %q must be a string or a list of strings", k)
		}
	}
	return h, nil
}
