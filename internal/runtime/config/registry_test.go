package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// endpoints renders a route as "kind URL caps" lines, the order being the point.
func endpoints(t *testing.T, r Registry, host string) []string {
	t.Helper()
	rt, err := r.Route(host)
	if err != nil {
		t.Fatalf("route %s: %v", host, err)
	}
	var out []string
	for _, e := range rt.Endpoints {
		caps := ""
		for _, c := range []struct {
			bit  int
			name string
		}{{CapPull, "p"}, {CapResolve, "r"}} {
			if e.Has(c.bit) {
				caps += c.name
			}
		}
		out = append(out, e.String()+" "+e.URL.Path+" "+caps)
	}
	return out
}

func parse(t *testing.T, doc string) Config {
	t.Helper()
	c := Default()
	if err := Parse([]byte(doc), &c); err != nil {
		t.Fatalf("parse: %v", err)
	}
	return c
}

func registries(t *testing.T, c Config) Registry {
	t.Helper()
	r, err := c.Registries()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wantLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestNoRegistryIsTodaysBehaviour: without configuration a pull goes to the image's
// own registry only, scheme left to go-containerregistry as before.
func TestNoRegistryIsTodaysBehaviour(t *testing.T) {
	c := Default()
	r := registries(t, c)
	rt, err := r.Route("docker.io")
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.Endpoints) != 1 || !rt.Endpoints[0].Implicit || rt.Endpoints[0].Mirror || rt.Source != "" {
		t.Fatalf("default route %+v", rt)
	}
	wantLines(t, endpoints(t, r, "registry.k8s.io"), "upstream https://registry.k8s.io /v2 pr")
}

// TestRegistryHostsKeepWrittenOrder: mirrors are tried in the order written, whether
// as table headers, dotted keys or an inline table; never in map order.
func TestRegistryHostsKeepWrittenOrder(t *testing.T) {
	c := parse(t, `
registry.hosts."quay.io".host."https://z.example".capabilities = ["pull"]
registry.hosts."quay.io".host."https://a.example".capabilities = ["pull", "resolve"]

[registry.hosts."docker.io"]
server = "https://registry-1.docker.io"
[registry.hosts."docker.io".host."https://mirror-c.example/us"]
capabilities = ["pull"]
[registry.hosts."docker.io".host."http://10.0.0.5:5000"]
[registry.hosts."docker.io".host."https://b.example/v2/upstream"]
override_path = true

[registry.hosts."ghcr.io"]
skip_upstream = true
host = { "http://m2.local:5000" = {}, "http://m1.local:5000" = { capabilities = ["pull"] } }
`)
	r := registries(t, c)
	wantLines(t, endpoints(t, r, "docker.io"),
		"mirror https://mirror-c.example/us/v2 /us/v2 p",
		"mirror http://10.0.0.5:5000 /v2 pr",
		"mirror https://b.example/v2/upstream /v2/upstream pr",
		"upstream https://registry-1.docker.io /v2 pr")
	wantLines(t, endpoints(t, r, "quay.io"),
		"mirror https://z.example /v2 p",
		"mirror https://a.example /v2 pr",
		"upstream https://quay.io /v2 pr")
	wantLines(t, endpoints(t, r, "ghcr.io"),
		"mirror http://m2.local:5000 /v2 pr",
		"mirror http://m1.local:5000 /v2 p")
}

// TestLegacyMirrorsAreNamespaces: [mirrors] is the short form of registry.hosts.
func TestLegacyMirrorsAreNamespaces(t *testing.T) {
	c := parse(t, `
[mirrors."registry.k8s.io"]
endpoints = ["http://127.0.0.1:5000", "https://m.example"]
skip_upstream = true
[mirrors."docker.io"]
endpoints = ["http://127.0.0.1:5001"]
`)
	r := registries(t, c)
	wantLines(t, endpoints(t, r, "registry.k8s.io"), "mirror http://127.0.0.1:5000 /v2 pr", "mirror https://m.example /v2 pr")
	wantLines(t, endpoints(t, r, "docker.io"), "mirror http://127.0.0.1:5001 /v2 pr", "upstream https://docker.io /v2 pr")

	bad := Default()
	err := Parse([]byte("[mirrors.\"docker.io\"]\nendpoints = [\"http://a\"]\n[registry.hosts.\"docker.io\"]\nserver = \"https://b\"\n"), &bad)
	if err == nil || !strings.Contains(err.Error(), "configured twice") {
		t.Fatalf("a host in both forms: %v", err)
	}
}

// TestHostsDirectory reads containerd's layout: host_port_ before host:port, the
// host's own directory before _default, runtime.toml before config_path, the
// first directory of config_path before the next, relative paths from the file's
// directory, Docker's certificate files when there is no hosts.toml.
func TestHostsDirectory(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(d1, "docker.io", "hosts.toml"), `
server = "https://registry-1.docker.io"
[host."https://mirror.example"]
  capabilities = ["pull", "resolve"]
  ca = "mirror.crt"
  client = [["/etc/certs/c.cert", "/etc/certs/c.key"], "/etc/certs/both.pem"]
  skip_verify = false
  dial_timeout = "2s"
  [host."https://mirror.example".header]
    x-custom = ["a", "b"]
[host."http://pull-only.example"]
  capabilities = ["pull"]
`)
	write(filepath.Join(d1, "reg.example_5000_", "hosts.toml"), "server = \"https://reg.example:5000\"\n[host.\"http://underscore\"]\n")
	write(filepath.Join(d1, "reg.example:5000", "hosts.toml"), "[host.\"http://colon\"]\n")
	write(filepath.Join(d2, "_default", "hosts.toml"), "[host.\"https://everything.example\"]\ncapabilities = [\"pull\"]\n")
	write(filepath.Join(d2, "docker.io", "hosts.toml"), "[host.\"https://never-read\"]\n")
	write(filepath.Join(d1, "certs.example", "ca.crt"), "x")
	write(filepath.Join(d1, "certs.example", "client.cert"), "x")
	write(filepath.Join(d1, "certs.example", "client.key"), "x")

	r := Registry{ConfigPath: d1 + ":" + d2}
	wantLines(t, endpoints(t, r, "docker.io"),
		"mirror https://mirror.example /v2 pr", "mirror http://pull-only.example /v2 p", "upstream https://registry-1.docker.io /v2 pr")
	rt, _ := r.Route("docker.io")
	m := rt.Endpoints[0]
	if rt.Source != filepath.Join(d1, "docker.io", "hosts.toml") || m.CAFiles[0] != filepath.Join(d1, "docker.io", "mirror.crt") ||
		m.ClientPairs[0] != [2]string{"/etc/certs/c.cert", "/etc/certs/c.key"} || m.ClientPairs[1] != [2]string{"/etc/certs/both.pem", ""} ||
		m.DialTimeout.String() != "2s" || strings.Join(m.Header.Values("X-Custom"), ",") != "a,b" {
		t.Fatalf("mirror settings %+v from %s", m, rt.Source)
	}
	wantLines(t, endpoints(t, r, "reg.example:5000"), "mirror http://underscore /v2 pr", "upstream https://reg.example:5000 /v2 pr")
	// No directory of its own in d1: d2's _default, with the image's registry as upstream.
	wantLines(t, endpoints(t, r, "quay.io"), "mirror https://everything.example /v2 p", "upstream https://quay.io /v2 pr")
	rt, _ = r.Route("certs.example")
	if e := rt.Endpoints[0]; len(rt.Endpoints) != 1 || e.Mirror || e.CAFiles[0] != filepath.Join(d1, "certs.example", "ca.crt") ||
		e.ClientPairs[0][1] != filepath.Join(d1, "certs.example", "client.key") {
		t.Fatalf("docker certificate files: %+v", rt)
	}

	// runtime.toml's own namespaces come first, its _default included.
	r.Hosts = map[string]Namespace{DefaultNamespace: {Server: "https://only.example"}}
	wantLines(t, endpoints(t, r, "docker.io"), "upstream https://only.example /v2 pr")
}

func TestCredentials(t *testing.T) {
	c := parse(t, `
[registry.auth."registry-1.docker.io"]
username = "u"
password = "p"
[registry.auth."ghcr.io"]
auth = "dTpw"
[registry.auth."gcr.io"]
identitytoken = "tok"
`)
	for _, h := range []string{"docker.io", "index.docker.io", "registry-1.docker.io"} {
		if cr, ok := c.Registry.Credentials(h); !ok || cr.Username != "u" {
			t.Errorf("%s: %+v %v", h, cr, ok)
		}
	}
	if _, ok := c.Registry.Credentials("quay.io"); ok {
		t.Error("quay.io has no credentials")
	}
}

// TestRegistryBadInput: every refusal is one line naming what to change.
func TestRegistryBadInput(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"[registry.hosts.\"a.io\"]\nproxy = \"http://p\"", "unknown key"},
		{"[registry.hosts.\"a.io\"]\ncapabilities = [\"fetch\"]", "not one of pull, resolve, push"},
		{"[registry.hosts.\"a.io\"]\nca = \"rel/ca.pem\"", "must be absolute"},
		{"[registry.hosts.\"a.io\"]\nclient = [[\"/a\"]]", "pairs"},
		{"[registry.hosts.\"a.io\"]\nskip_upstream = true", "nowhere to pull from"},
		{"[registry.hosts.\"a.io\"]\nserver = \"ftp://x\"", "http or https"},
		{"[registry.hosts.\"a.io\"]\ndial_timeout = \"soon\"", "positive duration"},
		{"[registry.hosts.\"https://a.io\"]\nserver = \"https://a.io\"", "host[:port]"},
		{"[registry.auth.\"a.io\"]\nusername = \"u\"\nauth = \"dTpw\"", "mixes credential forms"},
		{"[registry.auth.\"a.io\"]\nauth = \"not base64\"", "base64"},
		{"[registry.auth.\"a.io\"]", "is empty"},
		{"[registry.auth.\"a.io\"]\npassword = \"p\"", "without a username"},
		{"[registry.auth.\"a.io\"]\ntoken = \"t\"", "unknown key"},
		{"[registry]\nconfig_path = \"certs.d\"", "absolute"},
	} {
		c := Default()
		err := Parse([]byte(tc.in), &c)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: err = %v, want one line with %q", tc.in, err, tc.want)
		}
	}
}

// TestHostsFileBadInput: a hosts.toml the runtime cannot follow fails the pulls of its
// host (and Check) with the file's name, instead of being ignored.
func TestHostsFileBadInput(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"server = \"https://a\"\nproxy = \"http://p\"", "not supported"},
		{"[host.\"http://m\"]\nskip_upstream = true", "skip_upstream"},
		{"skip_upstream = true\n[host.\"http://m\"]", "skip_upstream"},
		{"[host.\"http://m\"]\ncapabilities = [\"all\"]", "capability"},
		{"server = ", "parse TOML"},
	} {
		root := t.TempDir()
		os.MkdirAll(filepath.Join(root, "a.io"), 0o755)
		file := filepath.Join(root, "a.io", "hosts.toml")
		os.WriteFile(file, []byte(tc.in), 0o644)
		r := Registry{ConfigPath: root}
		_, err := r.Route("a.io")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), file) {
			t.Errorf("%q: err = %v, want %q naming %s", tc.in, err, tc.want, file)
		}
		if err := r.Check(); err == nil {
			t.Errorf("%q: Check passed", tc.in)
		}
	}
}

// TestCheckReadsCertificates: Check loads every CA and client file named anywhere.
func TestCheckReadsCertificates(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a.io"), 0o755)
	os.WriteFile(filepath.Join(root, "a.io", "hosts.toml"), []byte("[host.\"https://m\"]\nca = \"missing.pem\"\n"), 0o644)
	r := Registry{ConfigPath: root + ":/nonexistent/certs.d"}
	err := r.Check()
	if err == nil || !strings.Contains(err.Error(), filepath.Join(root, "a.io", "missing.pem")) {
		t.Fatalf("missing CA: %v", err)
	}
	os.WriteFile(filepath.Join(root, "a.io", "missing.pem"), []byte("not PEM"), 0o644)
	if err := r.Check(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("bad CA: %v", err)
	}
	os.Remove(filepath.Join(root, "a.io", "hosts.toml"))
	if err := r.Check(); err != nil {
		t.Fatalf("an empty host directory and a missing config_path directory: %v", err)
	}
}
