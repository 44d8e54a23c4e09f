package runtimemove

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io/fs"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rtconfig "github.com/quantyroot/quantykube/internal/runtime/config"
)

// writeFile writes s at dir/rel (directories made) and returns the path.
func writeFile(t *testing.T, dir, rel, s string) string {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// carriedConfig translates containerd's config at path and returns the runtime.toml
// that results over cur, parsed by the runtime's own loader.
func carriedConfig(t *testing.T, path string, cur string) (carryPlan, rtconfig.Config, rtconfig.Registry) {
	t.Helper()
	c, err := readContainerd(path)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	cp, err := planCarry(c, []byte(cur), path)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	rc := rtconfig.Default()
	if err := rtconfig.Parse(append([]byte(cp.Block), cur...), &rc); err != nil {
		t.Fatalf("runtime.toml:\n%s%s\n%v", cp.Block, cur, err)
	}
	reg, err := rc.Registries()
	if err != nil {
		t.Fatal(err)
	}
	return cp, rc, reg
}

func route(t *testing.T, reg rtconfig.Registry, host string) string {
	t.Helper()
	rt, err := reg.Route(host)
	if err != nil {
		t.Fatalf("route %s: %v", host, err)
	}
	var out []string
	for _, e := range rt.Endpoints {
		out = append(out, e.String())
	}
	return strings.Join(out, ", ")
}

// TestContainerdV2ConfigPath: containerd 1.6/1.7 as the kubeadm harness writes it
// (config_path and sandbox_image) is carried as a reference to the same directory.
func TestContainerdV2ConfigPath(t *testing.T) {
	d := t.TempDir()
	certs := filepath.Join(d, "certs.d")
	writeFile(t, certs, "registry.k8s.io/hosts.toml", "server = \"https://registry.k8s.io\"\n[host.\"http://10.88.0.1:5000\"]\n  capabilities = [\"pull\", \"resolve\"]\n")
	cfg := writeFile(t, d, "config.toml", fmt.Sprintf(`version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
    [plugins."io.containerd.grpc.v1.cri".registry.auths]
    [plugins."io.containerd.grpc.v1.cri".registry.configs]
    [plugins."io.containerd.grpc.v1.cri".registry.headers]
    [plugins."io.containerd.grpc.v1.cri".registry.mirrors]
`, certs))
	// The harness's runtime.toml: its own mirrors stay in charge of their host.
	cur := "# Written by scripts/kubeadm.sh\n[mirrors.\"registry.k8s.io\"]\nendpoints = [\"http://10.88.0.1:5000\"]\nskip_upstream = true\n"
	cp, rc, reg := carriedConfig(t, cfg, cur)
	if rc.PauseImage != "registry.k8s.io/pause:3.9" || cp.PauseImage != rc.PauseImage || reg.ConfigPath != certs || cp.Secrets {
		t.Fatalf("carried %+v into %+v", cp, rc)
	}
	if got := route(t, reg, "registry.k8s.io"); got != "mirror http://10.88.0.1:5000" {
		t.Fatalf("registry.k8s.io: %s", got)
	}
	if len(reg.Hosts) != 1 || !strings.Contains(cp.Block, "registry.config_path = ") || !strings.HasSuffix(cp.Block+cur, cur) {
		t.Fatalf("block %q over %q", cp.Block, cur)
	}
	// A hosts.toml the runtime cannot follow is a refusal naming the file.
	writeFile(t, certs, "quay.io/hosts.toml", "server = \"https://quay.io\"\nproxy = \"http://p:3128\"\n")
	c, _ := readContainerd(cfg)
	if _, err := planCarry(c, []byte(cur), cfg); err == nil || !strings.Contains(err.Error(), filepath.Join(certs, "quay.io", "hosts.toml")) || !strings.Contains(err.Error(), "proxy") {
		t.Fatalf("bad hosts.toml: %v", err)
	}
}

// TestContainerdV3: containerd 2.x keeps registries and the sandbox image in its images
// plugin; config_path may list several directories (its default has two).
func TestContainerdV3(t *testing.T) {
	d := t.TempDir()
	one, two := filepath.Join(d, "containerd-certs.d"), filepath.Join(d, "docker-certs.d")
	writeFile(t, two, "ghcr.io/hosts.toml", "[host.\"https://ghcr-mirror.example\"]\ncapabilities = [\"pull\"]\n")
	cfg := writeFile(t, d, "config.toml", fmt.Sprintf(`version = 3
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = 'registry.k8s.io/pause:3.10'
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = '%s:%s'
  [plugins.'io.containerd.cri.v1.images'.registry.configs.'ghcr.io'.auth]
    username = 'bot'
    password = 'pat-s3cr3t'
[plugins.'io.containerd.cri.v1.runtime']
  enable_cdi = true
`, one, two))
	cp, rc, reg := carriedConfig(t, cfg, "")
	if rc.PauseImage != "registry.k8s.io/pause:3.10" || reg.ConfigPath != one+":"+two || !cp.Secrets {
		t.Fatalf("carried %+v into %+v", cp, rc)
	}
	if got := route(t, reg, "ghcr.io"); got != "mirror https://ghcr-mirror.example, upstream https://ghcr.io" {
		t.Fatalf("ghcr.io: %s", got)
	}
	if cr, ok := reg.Credentials("ghcr.io"); !ok || cr.Username != "bot" {
		t.Fatalf("credentials %+v", cr)
	}
	if cr, _ := reg.Credentials("ghcr.io"); cr.Password != "pat-s3cr3t" {
		t.Fatalf("password %q", cr.Password)
	}
	for _, n := range cp.Notes {
		if strings.Contains(n, "s3cr3t") {
			t.Fatalf("a note shows a secret: %q", n)
		}
	}
}

// TestContainerdDeprecatedMirrorsAndConfigs: containerd 1.x's mirrors, configs (auth,
// tls) and auths become namespaces and credentials with containerd's meaning.
func TestContainerdDeprecatedMirrorsAndConfigs(t *testing.T) {
	d := t.TempDir()
	ca := writeFile(t, d, "pki/mirror-ca.pem", testCAPEM(t))
	cfg := writeFile(t, d, "config.toml", fmt.Sprintf(`version = 2
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
  endpoint = ["localhost:5000", "https://mirror.example.com"]
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."reg.example.com"]
  endpoint = ["https://cache.example.com", "https://reg.example.com"]
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."quay.io"]
  endpoint = ["https://proxy.example.com/quay"]
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."*"]
  endpoint = ["https://everything.example.com"]
[plugins."io.containerd.grpc.v1.cri".registry.configs."mirror.example.com".tls]
  ca_file = %q
[plugins."io.containerd.grpc.v1.cri".registry.configs."private.example.com:5000".tls]
  insecure_skip_verify = true
[plugins."io.containerd.grpc.v1.cri".registry.configs."private.example.com:5000".auth]
  auth = "dXNlcjpwYXNz"
[plugins."io.containerd.grpc.v1.cri".registry.configs."gcr.io".auth]
  username = "_json_key"
  password = '{"type": "service_account"}'
[plugins."io.containerd.grpc.v1.cri".registry.auths."https://gcr.io"]
  identitytoken = "refresh"
`, ca))
	_, _, reg := carriedConfig(t, cfg, "state_dir = \"/run/qk\"\n")
	// A bare localhost endpoint is plain HTTP; the upstream comes last.
	if got := route(t, reg, "docker.io"); got != "mirror http://localhost:5000, mirror https://mirror.example.com, upstream https://docker.io" {
		t.Fatalf("docker.io: %s", got)
	}
	// The registry itself is listed: containerd adds no upstream after it.
	if got := route(t, reg, "reg.example.com"); got != "mirror https://cache.example.com, mirror https://reg.example.com" {
		t.Fatalf("reg.example.com: %s", got)
	}
	rt, _ := reg.Route("docker.io")
	if len(rt.Endpoints[1].CAFiles) != 1 || rt.Endpoints[1].CAFiles[0] != ca {
		t.Fatalf("mirror.example.com's CA not carried: %+v", rt.Endpoints[1])
	}
	// A path is containerd 1.x's API root as written: override_path.
	if got := route(t, reg, "quay.io"); got != "mirror https://proxy.example.com/quay, upstream https://quay.io" {
		t.Fatalf("quay.io: %s", got)
	}
	if got := route(t, reg, "ghcr.io"); got != "mirror https://everything.example.com, upstream https://ghcr.io" {
		t.Fatalf("ghcr.io through *: %s", got)
	}
	// TLS for a host without a mirrors entry: its own namespace, on "*"'s mirrors.
	rt, _ = reg.Route("private.example.com:5000")
	if len(rt.Endpoints) != 2 || !rt.Endpoints[1].SkipVerify || rt.Endpoints[1].Host() != "private.example.com:5000" {
		t.Fatalf("private registry: %+v", rt.Endpoints)
	}
	if cr, _ := reg.Credentials("private.example.com:5000"); cr.Auth != "dXNlcjpwYXNz" {
		t.Fatalf("auth form: %+v", cr)
	}
	// auths (older still) override configs.<host>.auth, as in containerd.
	if cr, _ := reg.Credentials("gcr.io"); cr.IdentityToken != "refresh" || cr.Username != "" {
		t.Fatalf("gcr.io: %+v", cr)
	}
}

// TestContainerdImports: an import's plugin section replaces the main file's, whole.
func TestContainerdImports(t *testing.T) {
	d := t.TempDir()
	writeFile(t, d, "conf.d/10-registry.toml", "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"docker.io\"]\nendpoint = [\"https://imported.example\"]\n")
	cfg := writeFile(t, d, "config.toml", "version = 2\nimports = [\"conf.d/*.toml\"]\n[plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"registry.k8s.io/pause:3.8\"\n")
	c, err := readContainerd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.From) != 2 || c.PauseImage != "" || c.Hosts["docker.io"].Order[0] != "https://imported.example" {
		t.Fatalf("carried %+v", c)
	}
}

// TestContainerdNothingToCarry: no file, or a file without registry settings.
func TestContainerdNothingToCarry(t *testing.T) {
	d := t.TempDir()
	c, err := readContainerd(filepath.Join(d, "none.toml"))
	if err != nil || !c.empty() {
		t.Fatalf("missing file: %+v %v", c, err)
	}
	cfg := writeFile(t, d, "config.toml", "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\nsnapshotter = \"overlayfs\"\n")
	cp, _, _ := carriedConfig(t, cfg, "")
	if cp.Block != "" {
		t.Fatalf("block %q", cp.Block)
	}
}

// TestContainerdRefusals: what cannot be carried faithfully is refused with one line
// naming the setting and the fix.
func TestContainerdRefusals(t *testing.T) {
	v2 := "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n"
	for _, tc := range []struct{ in, want string }{
		{"[plugins.cri.registry.mirrors.\"docker.io\"]\nendpoint = [\"https://m\"]\n", "containerd config migrate"},
		{"version = 4\n", "versions 2"},
		{v2 + "[plugins.\"io.containerd.grpc.v1.cri\".registry.headers]\nX-Meta = [\"a\"]\n", "registry.headers"},
		{v2 + "config_path = \"/etc/containerd/certs.d\"\n[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"docker.io\"]\nendpoint = [\"https://m\"]\n", "both config_path and mirrors"},
		{v2 + "config_path = \"/etc/containerd/certs.d\"\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"m\".tls]\nca_file = \"/ca.pem\"\n", "hosts.toml"},
		{v2 + "[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"ghcr.io\".auth]\nregistrytoken = \"t\"\n", `configs."ghcr.io".auth.registrytoken`},
		{v2 + "[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"ghcr.io\".auth]\nusername = \"u\"\nauth = \"dTpw\"\n", `configs."ghcr.io".auth mixes credential forms`},
		{v2 + "[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"ghcr.io\".tls]\ncert_file = \"/c.pem\"\n", "cert_file and key_file"},
		{v2 + "[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"ghcr.io\".tls]\nca_file = \"/nonexistent/ca.pem\"\n", `tls.ca_file /nonexistent/ca.pem cannot be read`},
		{v2 + "config_path = \"certs.d\"\n", "not absolute"},
		{v2 + "mirror = {}\n", "registry.mirror is not carried over"},
		{v2 + "[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"docker.io\"]\nendpoints = [\"https://m\"]\n", `mirrors."docker.io".endpoints`},
		{"version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"\n", "not TOML"},
	} {
		cfg := writeFile(t, t.TempDir(), "config.toml", tc.in)
		c, err := readContainerd(cfg)
		if err == nil {
			_, err = planCarry(c, nil, cfg)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q:\n  err = %v\n  want one line with %q", tc.in, err, tc.want)
		}
	}
}

// TestPlanCarryKeepsTheRuntimesOwn: runtime.toml's own pause_image and [registry] win
// (and are named in the plan); a rerun over a file with an earlier block gives the
// same bytes.
func TestPlanCarryKeepsTheRuntimesOwn(t *testing.T) {
	c := &carried{ConfigPath: "/etc/containerd/certs.d", PauseImage: "registry.k8s.io/pause:3.9"}
	own := "pause_image = \"registry.k8s.io/pause:3.10.2\"\n[registry]\nconfig_path = \"/etc/quantykube/certs.d\"\n"
	cp, err := planCarry(c, []byte(own), "config.toml")
	if err != nil || cp.Block != "" || cp.PauseImage != "registry.k8s.io/pause:3.10.2" {
		t.Fatalf("%+v %v", cp, err)
	}
	notes := strings.Join(cp.Notes, "; ")
	if !strings.Contains(notes, "pause_image registry.k8s.io/pause:3.10.2 kept") || !strings.Contains(notes, "own [registry] kept") {
		t.Fatalf("notes %q", notes)
	}
	rest := "log_level = \"debug\"\n[mirrors.\"docker.io\"]\nendpoints = [\"http://127.0.0.1:5000\"]\n"
	first, err := planCarry(c, []byte(rest), "config.toml")
	if err != nil || first.Block == "" {
		t.Fatalf("%+v %v", first, err)
	}
	again, err := planCarry(c, append([]byte(first.Block), rest...), "config.toml")
	if err != nil || again.Block != first.Block {
		t.Fatalf("rerun: %q, first %q (%v)", again.Block, first.Block, err)
	}
	if got := string(stripCarried(append([]byte(first.Block), rest...))); got != rest {
		t.Fatalf("strip: %q", got)
	}
}

// TestCarryStep runs the journaled step's Do and Undo on files: runtime.toml gets the
// block at its top (0600 with credentials), a rerun writes the same bytes, the undo
// gives the original bytes and mode back (or removes a file that did not exist), and
// containerd's configuration and hosts directory are never written.
func TestCarryStep(t *testing.T) {
	d := t.TempDir()
	certs := filepath.Join(d, "certs.d")
	writeFile(t, certs, "docker.io/hosts.toml", "[host.\"https://m.example\"]\n")
	ctrd := writeFile(t, d, "containerd/config.toml", fmt.Sprintf("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\nconfig_path = %q\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"m.example\".auth]\nusername = \"u\"\npassword = \"p\"\n", certs))
	before := treeSum(t, d)

	for _, existed := range []bool{true, false} {
		p := DefaultPaths()
		p.StateDir, p.ContainerdConfig, p.RuntimeConfig = t.TempDir(), ctrd, filepath.Join(t.TempDir(), "etc", "runtime.toml")
		orig := "# mine\nlog_level = \"info\"\n"
		if existed {
			writeFile(t, filepath.Dir(p.RuntimeConfig), "runtime.toml", orig)
		}
		cp, err := p.planRegistries("containerd")
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		m := &Mover{Paths: p, Out: &out, Log: slog.New(slog.DiscardHandler), meta: &meta{Carry: &cp}}
		for range 2 { // a rerun (recovery) writes the same bytes
			if err := m.carryDo(context.Background()); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(p.RuntimeConfig)
			want := cp.Block
			if existed {
				want += orig
			}
			if string(b) != want {
				t.Fatalf("runtime.toml:\n%s\nwant\n%s", b, want)
			}
			if st, _ := os.Stat(p.RuntimeConfig); st.Mode().Perm() != 0o600 {
				t.Fatalf("mode %v with credentials in the file", st.Mode())
			}
		}
		if err := m.carryUndo(context.Background()); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p.RuntimeConfig)
		if existed {
			if string(b) != orig {
				t.Fatalf("undo wrote %q", b)
			}
			if st, _ := os.Stat(p.RuntimeConfig); st.Mode().Perm() != 0o644 {
				t.Fatalf("undo left mode %v", st.Mode())
			}
		} else if !os.IsNotExist(err) {
			t.Fatalf("undo left a file that did not exist: %q %v", b, err)
		}
	}
	if after := treeSum(t, d); after != before {
		t.Fatal("containerd's configuration or hosts directory changed")
	}
}

// TestUndoTouchesNoConfiguration pins undo runtime's plan: containerd's configuration is
// never written by install, so undo has nothing of it to restore; runtime.toml keeps
// what was carried (the runtime is stopped and its data kept, ADR 006).
func TestUndoTouchesNoConfiguration(t *testing.T) {
	var names []string
	for _, s := range (&Mover{}).undoPlan().Steps {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, " "); got != "stop-kubelet remove-new-pods restore-kubelet start-kubelet stop-runtime" {
		t.Fatalf("undo steps %q", got)
	}
	steps := (&Mover{}).installPlan().Steps
	if steps[0].Name != "carry-registries" || steps[0].Undo == nil || steps[1].Name != "start-runtime" {
		t.Fatalf("carry-registries must come first, before the runtime reads its configuration, and be undone")
	}
}

func treeSum(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		st, _ := e.Info()
		fmt.Fprintf(h, "%s %v %x\n", p, st.Mode(), sha256.Sum256(b))
		return nil
	})
	return fmt.Sprintf("%x", h.Sum(nil))
}

// testCAPEM is a self-signed CA certificate in PEM, for Check to read.
func testCAPEM(t *testing.T) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mirror CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
