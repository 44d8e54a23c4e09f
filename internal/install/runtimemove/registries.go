package runtimemove

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"

	rtconfig "github.com/quantyroot/quantykube/internal/runtime/config"
)

// carried is what `install runtime` takes from containerd's configuration into
// runtime.toml: the registry settings of its CRI plugin and the sandbox (pause) image.
// Every path (config_path directories, CA and certificate files) is referenced where it
// is, never copied; containerd's files are only read.
type carried struct {
	// From lists the files read: config.toml, then its imports.
	From []string
	// ConfigPath is containerd's registry config_path, as written.
	ConfigPath string
	// Hosts are namespaces translated from the deprecated mirrors and configs.tls.
	Hosts map[string]rtconfig.Namespace
	// Auth are configs.<host>.auth (and the older auths), by host.
	Auth map[string]rtconfig.Credentials
	// PauseImage is sandbox_image (config version 2) or pinned_images.sandbox (3).
	PauseImage string
}

func (c *carried) empty() bool {
	return c.ConfigPath == "" && len(c.Hosts) == 0 && len(c.Auth) == 0 && c.PauseImage == ""
}

// The CRI plugins' table names by config version: containerd 1.6/1.7 (version 2) has
// one CRI plugin; containerd 2.x (version 3) keeps images and registries in its own.
const (
	criPluginV2    = "io.containerd.grpc.v1.cri"
	imagesPluginV3 = "io.containerd.cri.v1.images"
)

// readContainerd reads containerd's config.toml at path and the files it imports and
// translates their registry settings. A missing file is containerd's defaults: nothing
// to carry. What cannot be carried over faithfully is an error naming the setting and
// the fix (the preflight refuses with it).
func readContainerd(path string) (*carried, error) {
	c := &carried{}
	plugins := map[string]fileSection{} // the plugin sections that count, by canonical name
	if err := readContainerdFile(path, c, plugins, map[string]bool{}); err != nil {
		if errors.Is(err, fs.ErrNotExist) && len(c.From) == 0 {
			return c, nil
		}
		return nil, err
	}
	sec, ok := plugins["images"]
	if !ok {
		return c, nil
	}
	where := fmt.Sprintf("%s: plugins.%q", sec.file, sec.plugin)
	if err := c.translate(sec.table, where, sec.version); err != nil {
		return nil, err
	}
	return c, nil
}

// fileSection is a CRI plugin section and the file it came from.
type fileSection struct {
	file, plugin string
	version      int64
	table        map[string]any
}

// readContainerdFile reads one file and, after it, its imports (containerd applies an
// import's plugin sections over earlier ones, whole; so does this).
func readContainerdFile(path string, c *carried, plugins map[string]fileSection, seen map[string]bool) error {
	if seen[path] {
		return nil
	}
	seen[path] = true
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read containerd's configuration %s: %w", path, err)
	}
	c.From = append(c.From, path)
	var doc map[string]any
	if err := toml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("containerd's configuration %s is not TOML: %w", path, err)
	}
	version, _ := doc["version"].(int64)
	ps, _ := doc["plugins"].(map[string]any)
	switch version {
	case 0, 1:
		if t, ok := ps["cri"].(map[string]any); ok && (t["registry"] != nil || t["sandbox_image"] != nil) {
			return fmt.Errorf(`%s is a version 1 containerd configuration (plugins."cri"), which install runtime does not read: migrate it with `+"`containerd config migrate`"+` or write the registry settings into runtime.toml's [registry] yourself`, path)
		}
	case 2:
		if t, ok := ps[criPluginV2].(map[string]any); ok {
			plugins["images"] = fileSection{file: path, plugin: criPluginV2, version: 2, table: t}
		}
	case 3:
		if t, ok := ps[imagesPluginV3].(map[string]any); ok {
			plugins["images"] = fileSection{file: path, plugin: imagesPluginV3, version: 3, table: t}
		}
	default:
		return fmt.Errorf("%s has containerd config version %d; install runtime reads versions 2 (containerd 1.6, 1.7) and 3 (2.x)", path, version)
	}
	imports, _ := doc["imports"].([]any)
	for _, im := range imports {
		pat, _ := im.(string)
		if pat == "" {
			continue
		}
		if !filepath.IsAbs(pat) {
			pat = filepath.Join(filepath.Dir(path), pat)
		}
		files, err := filepath.Glob(pat)
		if err != nil {
			return fmt.Errorf("%s: imports %q: %w", path, pat, err)
		}
		sort.Strings(files)
		for _, f := range files {
			if err := readContainerdFile(f, c, plugins, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// translate takes the registry settings and the sandbox image of a CRI plugin section.
func (c *carried) translate(t map[string]any, where string, version int64) error {
	if version == 2 {
		if s, ok := t["sandbox_image"].(string); ok {
			c.PauseImage = s
		}
	} else if pin, ok := t["pinned_images"].(map[string]any); ok {
		if s, ok := pin["sandbox"].(string); ok {
			c.PauseImage = s
		}
	}
	reg, ok := t["registry"].(map[string]any)
	if !ok {
		return nil
	}
	where += ".registry"
	if err := onlyKeys(reg, where, "config_path", "mirrors", "configs", "auths", "headers"); err != nil {
		return err
	}
	if h, _ := reg["headers"].(map[string]any); len(h) > 0 {
		return fmt.Errorf("%s.headers is not carried over (quantykube runtime sets headers per registry): move them to each registry's hosts.toml `[header]` or remove them", where)
	}
	c.ConfigPath, _ = reg["config_path"].(string)
	for _, d := range filepath.SplitList(c.ConfigPath) {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("%s.config_path %q is not absolute: write the full path of the directory", where, d)
		}
	}
	mirrors, _ := reg["mirrors"].(map[string]any)
	configs, _ := reg["configs"].(map[string]any)
	if c.ConfigPath != "" && len(mirrors) > 0 {
		return fmt.Errorf("%s sets both config_path and mirrors, which containerd itself refuses: move the mirrors into hosts.toml files under config_path", where)
	}
	tls, auth, err := c.translateConfigs(configs, where)
	if err != nil {
		return err
	}
	if err := translateAuths(reg, where, auth); err != nil {
		return err
	}
	if len(auth) > 0 {
		c.Auth = auth
	}
	return c.translateMirrors(mirrors, tls, where)
}

// translateConfigs reads configs.<host>: its auth (credentials by host) and its tls
// (ca, client and skip_verify for the endpoints of that host).
func (c *carried) translateConfigs(configs map[string]any, where string) (map[string]rtconfig.HostConfig, map[string]rtconfig.Credentials, error) {
	tls := map[string]rtconfig.HostConfig{}
	auth := map[string]rtconfig.Credentials{}
	for _, host := range sortedKeys(configs) {
		w := fmt.Sprintf("%s.configs.%q", where, host)
		cfg, ok := configs[host].(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("%s must be a table with auth and tls", w)
		}
		if err := onlyKeys(cfg, w, "auth", "tls"); err != nil {
			return nil, nil, err
		}
		if a, ok := cfg["auth"].(map[string]any); ok {
			cr, err := credentials(a, w+".auth")
			if err != nil {
				return nil, nil, err
			}
			if cr != (rtconfig.Credentials{}) { // containerd's default config has empty auth tables
				if err := cr.Check(); err != nil {
					return nil, nil, fmt.Errorf("%s.auth %w", w, err)
				}
				auth[host] = cr
			}
		}
		if tt, ok := cfg["tls"].(map[string]any); ok && len(tt) > 0 {
			if c.ConfigPath != "" {
				return nil, nil, fmt.Errorf("%s.tls is set with config_path, which containerd itself refuses: set ca, client and skip_verify in %s's hosts.toml", w, host)
			}
			hc, err := tlsSettings(tt, w+".tls")
			if err != nil {
				return nil, nil, err
			}
			tls[host] = hc
		}
	}
	return tls, auth, nil
}

// translateAuths reads the older auths table (keyed by URL) into auth; as in
// containerd, an entry there overrides configs.<host>.auth.
func translateAuths(reg map[string]any, where string, auth map[string]rtconfig.Credentials) error {
	auths, _ := reg["auths"].(map[string]any)
	for _, endpoint := range sortedKeys(auths) {
		w := fmt.Sprintf("%s.auths.%q", where, endpoint)
		a, ok := auths[endpoint].(map[string]any)
		if !ok {
			return fmt.Errorf("%s must be a table of credentials", w)
		}
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" {
			return fmt.Errorf("%s: the key must be a URL like \"https://gcr.io\" (or move it to configs.<host>.auth)", w)
		}
		cr, err := credentials(a, w)
		if err != nil {
			return err
		}
		if err := cr.Check(); err != nil {
			return fmt.Errorf("%s %w", w, err)
		}
		auth[u.Host] = cr
	}
	return nil
}

// translateMirrors turns the deprecated mirrors (and configs.<host>.tls) into namespaces
// with containerd 1.x's semantics: a registry's endpoints in order (a bare host gets
// http:// on localhost, else https://; a path is the API root as written), then the
// registry itself unless one of its endpoints is it; "*" is every other registry
// (_default). TLS settings follow the endpoint host they are keyed by.
func (c *carried) translateMirrors(mirrors map[string]any, tls map[string]rtconfig.HostConfig, where string) error {
	hosts := map[string]rtconfig.Namespace{}
	for _, reg := range sortedKeys(mirrors) {
		w := fmt.Sprintf("%s.mirrors.%q", where, reg)
		m, ok := mirrors[reg].(map[string]any)
		if !ok {
			return fmt.Errorf("%s must be a table with endpoint", w)
		}
		if err := onlyKeys(m, w, "endpoint"); err != nil {
			return err
		}
		eps, _ := m["endpoint"].([]any)
		ns := rtconfig.Namespace{Host: map[string]rtconfig.HostConfig{}}
		for _, e := range eps {
			raw, _ := e.(string)
			if raw == "" {
				return fmt.Errorf("%s.endpoint lists an empty or non-string endpoint: remove it", w)
			}
			if !strings.Contains(raw, "://") {
				raw = defaultScheme(raw) + "://" + raw
			}
			u, err := url.Parse(raw)
			if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
				return fmt.Errorf("%s.endpoint %q is not an http(s) URL: fix or remove it", w, raw)
			}
			hc := tls[u.Host]
			hc.Capabilities = []string{"pull", "resolve"}
			hc.OverridePath = u.Path != "" && u.Path != "/"
			if _, dup := ns.Host[raw]; !dup {
				ns.Host[raw] = hc
				ns.Order = append(ns.Order, raw)
			}
			if u.Host == reg {
				ns.SkipUpstream = true // containerd adds no upstream when it is listed
			}
		}
		name := reg
		if reg == "*" {
			name = rtconfig.DefaultNamespace
		} else if err := validHost(reg); err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
		if !ns.SkipUpstream {
			ns.HostConfig = withoutCaps(tls[reg])
		}
		if len(ns.Order) == 0 && !ns.SkipUpstream && reflectEmpty(ns.HostConfig) {
			continue // an empty mirror entry changes nothing
		}
		hosts[name] = ns
	}
	// TLS for a host that has no mirrors entry: its own namespace, built on "*" if any.
	for _, h := range sortedNames(tls) {
		if _, ok := hosts[h]; ok {
			continue
		}
		if err := validHost(h); err != nil {
			return fmt.Errorf("%s.configs.%q: %w", where, h, err)
		}
		ns := rtconfig.Namespace{HostConfig: withoutCaps(tls[h])}
		if def, ok := hosts[rtconfig.DefaultNamespace]; ok {
			ns.Host, ns.Order = def.Host, def.Order
		}
		hosts[h] = ns
	}
	if len(hosts) > 0 {
		c.Hosts = hosts
	}
	return nil
}

func withoutCaps(hc rtconfig.HostConfig) rtconfig.HostConfig {
	hc.Capabilities = nil
	return hc
}

func reflectEmpty(hc rtconfig.HostConfig) bool {
	return hc.CA == nil && hc.Client == nil && hc.SkipVerify == nil
}

// credentials reads a containerd auth table: username, password, auth, identitytoken.
func credentials(a map[string]any, where string) (rtconfig.Credentials, error) {
	if err := onlyKeys(a, where, "username", "password", "auth", "identitytoken"); err != nil {
		return rtconfig.Credentials{}, err
	}
	var cr rtconfig.Credentials
	for k, dst := range map[string]*string{"username": &cr.Username, "password": &cr.Password, "auth": &cr.Auth, "identitytoken": &cr.IdentityToken} {
		if v, ok := a[k]; ok {
			s, ok := v.(string)
			if !ok {
				return cr, fmt.Errorf("%s.%s must be a string", where, k)
			}
			*dst = s
		}
	}
	return cr, nil
}

// tlsSettings reads a containerd tls table into a host's ca, client and skip_verify.
func tlsSettings(t map[string]any, where string) (rtconfig.HostConfig, error) {
	var hc rtconfig.HostConfig
	if err := onlyKeys(t, where, "insecure_skip_verify", "ca_file", "cert_file", "key_file"); err != nil {
		return hc, err
	}
	if v, ok := t["insecure_skip_verify"].(bool); ok && v {
		hc.SkipVerify = &v
	}
	ca, _ := t["ca_file"].(string)
	cert, _ := t["cert_file"].(string)
	key, _ := t["key_file"].(string)
	if (cert == "") != (key == "") {
		return hc, fmt.Errorf("%s sets only one of cert_file and key_file (containerd refuses that too): set both or neither", where)
	}
	for _, kv := range [][2]string{{"ca_file", ca}, {"cert_file", cert}, {"key_file", key}} {
		if kv[1] == "" {
			continue
		}
		if !filepath.IsAbs(kv[1]) {
			return hc, fmt.Errorf("%s.%s %q is not absolute: write the file's full path", where, kv[0], kv[1])
		}
		if _, err := os.Stat(kv[1]); err != nil {
			return hc, fmt.Errorf("%s.%s %s cannot be read (%v): fix the path or remove the setting", where, kv[0], kv[1], err)
		}
	}
	if ca != "" {
		hc.CA = ca
	}
	if cert != "" {
		hc.Client = []any{[]any{cert, key}}
	}
	return hc, nil
}

// onlyKeys refuses a key this translation does not know, naming it.
func onlyKeys(t map[string]any, where string, known ...string) error {
	for _, k := range sortedKeys(t) {
		if !slices.Contains(known, k) {
			return fmt.Errorf("%s.%s is not carried over by install runtime (it reads %s there): remove it, or move the node's registry settings into runtime.toml's [registry] by hand", where, k, strings.Join(known, ", "))
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// defaultScheme is containerd 1.x's for a bare mirror endpoint: http on localhost and
// loopback addresses, https elsewhere.
func defaultScheme(hostport string) string {
	h := hostport
	if i := strings.IndexByte(h, '/'); i >= 0 {
		h = h[:i]
	}
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	if h == "localhost" {
		return "http"
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return "http"
	}
	return "https"
}

func validHost(h string) error {
	u, err := url.Parse("//" + h)
	if err != nil || u.Host != h || h == "" {
		return fmt.Errorf("%q is not a registry host[:port]", h)
	}
	return nil
}
