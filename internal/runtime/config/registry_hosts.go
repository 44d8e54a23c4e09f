package config

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Route returns the endpoints a pull from registry host (host[:port], "docker.io")
// tries, in order, from the first namespace found (see Registry). Files under
// ConfigPath are read now, so an edit applies to the next pull.
func (r *Registry) Route(host string) (Route, error) {
	for _, ns := range []string{host, DefaultNamespace} {
		n, ok := r.Hosts[ns]
		if !ok {
			continue
		}
		src := fmt.Sprintf("runtime.toml registry.hosts.%q", ns)
		eps, err := n.endpoints(ns, "", src)
		if err != nil {
			return Route{}, err
		}
		return finish(host, src, eps), nil
	}
	for _, root := range filepath.SplitList(r.ConfigPath) {
		for _, d := range hostDirs(root, host) {
			st, err := os.Stat(d)
			if errors.Is(err, fs.ErrNotExist) || err == nil && !st.IsDir() {
				continue
			}
			if err != nil {
				return Route{}, fmt.Errorf("registry host directory %s: %w", d, err)
			}
			n, src, err := LoadHostDir(d)
			if err != nil {
				return Route{}, err
			}
			ns := host
			if filepath.Base(d) == DefaultNamespace {
				ns = DefaultNamespace
			}
			eps, err := n.endpoints(ns, d, src)
			if err != nil {
				return Route{}, err
			}
			return finish(host, src, eps), nil
		}
	}
	eps, err := Namespace{}.endpoints(host, "", "default")
	if err != nil {
		return Route{}, err
	}
	return Route{Registry: host, Endpoints: eps}, nil
}

// finish puts the image's registry into a _default namespace's implicit upstream.
func finish(host, src string, eps []Endpoint) Route {
	for i := range eps {
		if eps[i].Implicit {
			eps[i].URL.Host = host
		}
	}
	return Route{Registry: host, Source: src, Endpoints: eps}
}

// hostDirs are the directories of root searched for host, in containerd's order:
// host_port_ (for host:port), host:port or host, _default.
func hostDirs(root, host string) []string {
	var out []string
	if i := strings.LastIndex(host, ":"); i > 0 {
		out = append(out, filepath.Join(root, host[:i]+"_"+host[i+1:]+"_"))
	}
	return append(out, filepath.Join(root, host), filepath.Join(root, DefaultNamespace))
}

// LoadHostDir reads one registry host directory: its hosts.toml (unknown keys are an
// error), or, without one, Docker's certificate files (*.crt CAs, *.cert + *.key
// client pairs) for the upstream. It returns the namespace and the file it came from.
func LoadHostDir(dir string) (Namespace, string, error) {
	file := filepath.Join(dir, "hosts.toml")
	b, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Namespace{}, file, fmt.Errorf("read %s: %w", file, err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		n, err := dockerCertFiles(dir)
		return n, dir, err
	}
	n, err := ParseHostsFile(b)
	if err != nil {
		return Namespace{}, file, fmt.Errorf("%s: %w", file, err)
	}
	return n, file, nil
}

// ParseHostsFile decodes a containerd hosts.toml, keeping the order of its hosts.
func ParseHostsFile(b []byte) (Namespace, error) {
	var n Namespace
	d := toml.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&n); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) {
			return n, fmt.Errorf("key %s is not supported by quantykube runtime: remove it (the keys it reads are in docs/adr/103-registries-carried-over.md)", unknownKeys(sm))
		}
		return n, fmt.Errorf("parse TOML: %w", err)
	}
	if n.SkipUpstream {
		return n, errors.New("skip_upstream belongs to runtime.toml, not a hosts.toml: set the last mirror as server instead")
	}
	order, err := keyOrder(b, "host")
	if err != nil {
		return n, err
	}
	n.Order = order
	return n, nil
}

// dockerCertFiles reads Docker's certificate layout in dir (no hosts.toml).
func dockerCertFiles(dir string) (Namespace, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return Namespace{}, fmt.Errorf("read %s: %w", dir, err)
	}
	var cas, pairs []any
	for _, e := range ents {
		name := e.Name()
		switch filepath.Ext(name) {
		case ".crt":
			cas = append(cas, filepath.Join(dir, name))
		case ".cert":
			key := filepath.Join(dir, strings.TrimSuffix(name, ".cert")+".key")
			if _, err := os.Stat(key); err != nil {
				return Namespace{}, fmt.Errorf("client certificate %s has no key %s: add the key or remove the certificate", filepath.Join(dir, name), key)
			}
			pairs = append(pairs, []any{filepath.Join(dir, name), key})
		}
	}
	var n Namespace
	if len(cas) > 0 {
		n.CA = cas
	}
	if len(pairs) > 0 {
		n.Client = pairs
	}
	return n, nil
}

// TLSConfig is the endpoint's TLS client configuration, or nil when it sets nothing
// (the transport's defaults apply). CAs are added to the system's pool.
func (e Endpoint) TLSConfig() (*tls.Config, error) {
	if len(e.CAFiles) == 0 && len(e.ClientPairs) == 0 && !e.SkipVerify {
		return nil, nil
	}
	c := &tls.Config{InsecureSkipVerify: e.SkipVerify} //nolint:gosec // the operator's explicit skip_verify
	if len(e.CAFiles) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		for _, f := range e.CAFiles {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("CA file of %s: %w", e, err)
			}
			if !pool.AppendCertsFromPEM(b) {
				return nil, fmt.Errorf("CA file %s of %s holds no PEM certificate", f, e)
			}
		}
		c.RootCAs = pool
	}
	for _, p := range e.ClientPairs {
		certPEM, err := os.ReadFile(p[0])
		if err != nil {
			return nil, fmt.Errorf("client certificate of %s: %w", e, err)
		}
		keyPEM := certPEM
		if p[1] != "" {
			if keyPEM, err = os.ReadFile(p[1]); err != nil {
				return nil, fmt.Errorf("client key of %s: %w", e, err)
			}
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s of %s: %w", p[0], e, err)
		}
		c.Certificates = append(c.Certificates, cert)
	}
	return c, nil
}

// Check reads everything the registry configuration refers to — every namespace of
// runtime.toml, every host directory under ConfigPath and every CA and client
// certificate they name — and returns the first problem, naming the file and the fix.
// A missing ConfigPath directory is not a problem (containerd skips it too).
func (r *Registry) Check() error {
	var hosts []string
	for ns := range r.Hosts {
		hosts = append(hosts, ns)
	}
	sort.Strings(hosts)
	var routes []Route
	for _, ns := range hosts {
		rt, err := r.Route(ns)
		if err != nil {
			return err
		}
		routes = append(routes, rt)
	}
	for _, root := range filepath.SplitList(r.ConfigPath) {
		ents, err := os.ReadDir(root)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("registry.config_path %s: %w", root, err)
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			d := filepath.Join(root, e.Name())
			n, src, err := LoadHostDir(d)
			if err != nil {
				return err
			}
			ns := e.Name()
			if ns != DefaultNamespace {
				ns = "placeholder.invalid" // a directory's name need not be a valid host (host_port_)
			}
			eps, err := n.endpoints(ns, d, src)
			if err != nil {
				return err
			}
			routes = append(routes, Route{Source: src, Endpoints: eps})
		}
	}
	for _, rt := range routes {
		for _, e := range rt.Endpoints {
			if _, err := e.TLSConfig(); err != nil {
				return fmt.Errorf("%s: %w", rt.Source, err)
			}
		}
	}
	return nil
}
