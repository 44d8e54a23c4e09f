// Package config loads the runtime's configuration file (/etc/quantykube/runtime.toml).
//
// Every field has a default, so a missing file is not an error: Load returns Default()
// when the file does not exist. Unknown keys are rejected so that a typo is reported
// instead of silently ignored.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// DefaultPath is where the production unit reads its configuration.
const DefaultPath = "/etc/quantykube/runtime.toml"

// Config is the whole runtime configuration. The TOML keys are the snake_case names.
type Config struct {
	// Socket is the unix socket the CRI gRPC server listens on.
	Socket string `toml:"socket"`
	// StateDir holds everything that must survive a runtime restart: sandbox and
	// container records, bundles, monitor sockets and exit files.
	StateDir string `toml:"state_dir"`
	// RootDir holds images: unpacked layers, configs and the image index.
	RootDir string `toml:"root_dir"`
	// RuncPath is the runc binary; a bare name is looked up in PATH.
	RuncPath string `toml:"runc_path"`
	// RuncRoot is runc's --root (its own state).
	RuncRoot string `toml:"runc_root"`
	// CNIConfDir and CNIBinDirs are where libcni finds network configs and plugins.
	CNIConfDir string   `toml:"cni_conf_dir"`
	CNIBinDirs []string `toml:"cni_bin_dirs"`
	// CNICacheDir is libcni's result cache (used to delete a network after a restart).
	CNICacheDir string `toml:"cni_cache_dir"`
	// PauseImage is the image whose entrypoint holds a sandbox's namespaces.
	PauseImage string `toml:"pause_image"`
	// StreamAddress is the host:port of the exec/attach/port-forward HTTP server.
	StreamAddress string `toml:"stream_address"`
	// LogLevel is one of debug, info, warn, error.
	LogLevel string `toml:"log_level"`
	// CgroupParent is the cgroup under which pods go when kubelet gives no parent.
	CgroupParent string `toml:"cgroup_parent"`
	// Mirrors maps an upstream registry host (e.g. "docker.io") to the endpoints tried
	// before it, in order. Images keep their upstream names. The older, shorter form of
	// a registry.hosts entry (a host named in both is an error); see Registries.
	Mirrors map[string]Mirror `toml:"mirrors"`
	// Registry is where pulls go, per registry host: mirrors, TLS and credentials
	// (registry.go; docs/adr/103-registries-carried-over.md). Empty: every image from
	// its own registry, as before it existed.
	Registry Registry `toml:"registry"`
}

// Mirror lists the endpoints tried for one upstream registry host: a registry.hosts
// namespace whose hosts have capabilities pull and resolve.
type Mirror struct {
	// Endpoints are URLs like "http://127.0.0.1:5000" or "https://mirror.example".
	Endpoints []string `toml:"endpoints"`
	// SkipUpstream stops a pull from trying the upstream host after every endpoint
	// failed (for offline nodes and tests that must never leave the machine).
	SkipUpstream bool `toml:"skip_upstream"`
}

// Default returns the configuration used when no file exists.
func Default() Config {
	return Config{
		Socket:        "/run/quantykube/runtime.sock",
		StateDir:      "/run/quantykube/runtime",
		RootDir:       "/var/lib/quantykube/runtime",
		RuncPath:      "runc",
		RuncRoot:      "/run/quantykube/runc",
		CNIConfDir:    "/etc/cni/net.d",
		CNIBinDirs:    []string{"/opt/cni/bin", "/usr/lib/cni"},
		CNICacheDir:   "/var/lib/quantykube/runtime/cni-cache",
		PauseImage:    "registry.k8s.io/pause:3.10.2",
		StreamAddress: "127.0.0.1:0",
		LogLevel:      "info",
		CgroupParent:  "/quantykube",
	}
}

// Load reads path over the defaults. A missing file yields the defaults.
func Load(path string) (Config, error) {
	c := Default()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("read config %s: %w", path, err)
	}
	if err := Parse(b, &c); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes TOML into c (keeping c's values for absent keys) and validates the result.
func Parse(b []byte, c *Config) error {
	d := toml.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(c); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) {
			return fmt.Errorf("unknown key %s: check the spelling against docs/adr/101-runtime-design.md (registry: docs/adr/103-registries-carried-over.md)", unknownKeys(sm))
		}
		return fmt.Errorf("parse TOML: %w", err)
	}
	for ns, n := range c.Registry.Hosts {
		order, err := keyOrder(b, "registry", "hosts", ns, "host")
		if err != nil {
			return err
		}
		n.Order = order
		c.Registry.Hosts[ns] = n
	}
	return c.Validate()
}

// Registries is the effective registry configuration: Registry with each [mirrors]
// entry as the registry.hosts namespace it stands for. It fails when a host is in both.
func (c *Config) Registries() (Registry, error) {
	r := c.Registry
	if len(c.Mirrors) == 0 {
		return r, nil
	}
	r.Hosts = maps.Clone(r.Hosts)
	if r.Hosts == nil {
		r.Hosts = map[string]Namespace{}
	}
	for host, m := range c.Mirrors {
		if _, ok := r.Hosts[host]; ok {
			return Registry{}, fmt.Errorf("registry host %s is configured twice, in [mirrors] and [registry.hosts]: keep one (registry.hosts is the fuller form)", host)
		}
		n := Namespace{Host: map[string]HostConfig{}, SkipUpstream: m.SkipUpstream}
		for _, e := range m.Endpoints {
			if _, dup := n.Host[e]; !dup {
				n.Host[e] = HostConfig{Capabilities: []string{"pull", "resolve"}}
				n.Order = append(n.Order, e)
			}
		}
		r.Hosts[host] = n
	}
	return r, nil
}

// Validate reports the first field that cannot work, naming the fix.
func (c *Config) Validate() error {
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log_level %q is not one of debug, info, warn, error", c.LogLevel)
	}
	for name, v := range map[string]string{"socket": c.Socket, "state_dir": c.StateDir, "root_dir": c.RootDir, "runc_root": c.RuncRoot} {
		if v == "" || !strings.HasPrefix(v, "/") {
			return fmt.Errorf("%s %q must be an absolute path", name, v)
		}
	}
	if c.PauseImage == "" {
		return errors.New("pause_image is empty: set it to an image reference such as registry.k8s.io/pause:3.10.2")
	}
	for host, m := range c.Mirrors {
		for _, e := range m.Endpoints {
			if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
				return fmt.Errorf("mirror endpoint %q for %s must start with http:// or https://", e, host)
			}
		}
	}
	r, err := c.Registries()
	if err != nil {
		return err
	}
	return r.validate()
}

// unknownKeys names the keys of a strict decode's error on one line: `a.b (line 3)`.
func unknownKeys(sm *toml.StrictMissingError) string {
	var out []string
	for _, e := range sm.Errors {
		var parts []string
		for _, k := range e.Key() {
			if strings.ContainsAny(k, ".\" \t") || k == "" {
				k = strconv.Quote(k)
			}
			parts = append(parts, k)
		}
		row, _ := e.Position()
		out = append(out, fmt.Sprintf("%s (line %d)", strings.Join(parts, "."), row))
	}
	return strings.Join(out, ", ")
}
