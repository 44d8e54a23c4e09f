package runtimemove

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/pelletier/go-toml/v2"

	rtconfig "github.com/quantyroot/quantykube/internal/runtime/config"
)

// The carried-over block of runtime.toml sits between these lines, at the top of the
// file, as top-level dotted keys (`registry.hosts."docker.io".host."https://m".ca = ...`)
// so that it needs no table header and every line of the file after it keeps its
// meaning. A later install replaces the block; the rest of the file is never changed.
const (
	carriedBegin = "# >>> carried over from containerd by `quantykube install runtime`; a later install rewrites this block"
	carriedEnd   = "# <<< end of the block carried over from containerd"
)

// carryPlan is what the carry-registries step writes and what the plan says about it.
type carryPlan struct {
	// Block is the carried-over block ("" when there is nothing to carry).
	Block string
	// Notes say what is carried and what is kept, without secrets.
	Notes []string
	// Secrets is true when Block holds credentials (runtime.toml is then made 0600).
	Secrets bool
	// PauseImage is the runtime's pause image once the block is in place.
	PauseImage string
}

// planCarry merges what was carried from containerd with the runtime's configuration
// file (cur: its bytes, nil when absent). Settings runtime.toml makes itself win:
// its pause_image, its whole [registry] table, its [mirrors] entries. The result is
// parsed and checked (every hosts.toml and certificate it refers to) before it is
// returned, so a configuration that would not work is refused before anything changes.
func planCarry(c *carried, cur []byte, from string) (carryPlan, error) {
	rest := stripCarried(cur)
	var own map[string]any
	if err := toml.Unmarshal(rest, &own); err != nil {
		return carryPlan{}, fmt.Errorf("the runtime's configuration is not TOML: %w", err)
	}
	var p carryPlan
	var lines []string
	add := func(v string, key ...string) { lines = append(lines, tomlKey(key...)+" = "+v) }

	if c.PauseImage != "" {
		if s, ok := own["pause_image"].(string); ok {
			if s != c.PauseImage {
				p.Notes = append(p.Notes, fmt.Sprintf("pause_image %s kept (containerd's sandbox image is %s)", s, c.PauseImage))
			}
		} else {
			add(tomlString(c.PauseImage), "pause_image")
			p.Notes = append(p.Notes, "pause image "+c.PauseImage+" (containerd's sandbox image)")
		}
	}
	hasRegistry := c.ConfigPath != "" || len(c.Hosts) > 0 || len(c.Auth) > 0
	if _, ok := own["registry"]; ok && hasRegistry {
		p.Notes = append(p.Notes, "the runtime's own [registry] kept: containerd's registry settings are not carried over (compare them by hand)")
		hasRegistry = false
	}
	if hasRegistry {
		if c.ConfigPath != "" {
			add(tomlString(c.ConfigPath), "registry", "config_path")
			p.Notes = append(p.Notes, "config_path "+c.ConfigPath+" (its hosts.toml files are read where they are)")
		}
		ownMirrors, _ := own["mirrors"].(map[string]any)
		var nss, kept []string
		for _, ns := range sortedNames(c.Hosts) {
			if _, ok := ownMirrors[ns]; ok {
				kept = append(kept, ns)
				continue
			}
			nss = append(nss, ns)
			lines = append(lines, namespaceLines(ns, c.Hosts[ns])...)
		}
		if len(nss) > 0 {
			p.Notes = append(p.Notes, "registry hosts "+strings.Join(nss, ", ")+" (from the deprecated mirrors and configs.tls)")
		}
		if len(kept) > 0 {
			p.Notes = append(p.Notes, "the runtime's own [mirrors] kept for "+strings.Join(kept, ", "))
		}
		for _, h := range sortedNames(c.Auth) {
			a := c.Auth[h]
			for _, kv := range [][2]string{{"username", a.Username}, {"password", a.Password}, {"auth", a.Auth}, {"identitytoken", a.IdentityToken}} {
				if kv[1] != "" {
					add(tomlString(kv[1]), "registry", "auth", h, kv[0])
				}
			}
		}
		if len(c.Auth) > 0 {
			p.Secrets = true
			p.Notes = append(p.Notes, "credentials for "+strings.Join(sortedNames(c.Auth), ", ")+" (the file becomes readable by root only)")
		}
	}
	if len(lines) > 0 {
		p.Block = carriedBegin + "\n# from " + from + "\n" + strings.Join(lines, "\n") + "\n" + carriedEnd + "\n"
	}
	full := append([]byte(p.Block), rest...)
	rc := rtconfig.Default()
	if err := rtconfig.Parse(full, &rc); err != nil {
		return carryPlan{}, fmt.Errorf("the registry settings carried over from containerd do not work in runtime.toml: %w", err)
	}
	reg, err := rc.Registries()
	if err == nil {
		err = reg.Check()
	}
	if err != nil {
		return carryPlan{}, fmt.Errorf("the registry settings carried over from containerd do not work: %w", err)
	}
	p.PauseImage = rc.PauseImage
	return p, nil
}

// namespaceLines renders one translated namespace as dotted keys.
func namespaceLines(ns string, n rtconfig.Namespace) []string {
	var out []string
	base := []string{"registry", "hosts", ns}
	out = append(out, hostLines(base, n.HostConfig)...)
	for _, h := range n.Order {
		out = append(out, hostLines(append(append([]string{}, base...), "host", h), n.Host[h])...)
	}
	if n.SkipUpstream {
		out = append(out, tomlKey(append(base, "skip_upstream")...)+" = true")
	}
	return out
}

// hostLines renders the HostConfig fields a translation sets.
func hostLines(key []string, hc rtconfig.HostConfig) []string {
	var out []string
	k := func(name string) string { return tomlKey(append(append([]string{}, key...), name)...) }
	if len(hc.Capabilities) > 0 {
		out = append(out, k("capabilities")+" = "+tomlStrings(hc.Capabilities))
	}
	if ca, ok := hc.CA.(string); ok {
		out = append(out, k("ca")+" = "+tomlString(ca))
	}
	if pairs, ok := hc.Client.([]any); ok {
		var ps []string
		for _, p := range pairs {
			pair, _ := p.([]any)
			if len(pair) == 2 {
				ps = append(ps, tomlStrings([]string{pair[0].(string), pair[1].(string)}))
			}
		}
		out = append(out, k("client")+" = ["+strings.Join(ps, ", ")+"]")
	}
	if hc.SkipVerify != nil {
		out = append(out, fmt.Sprintf("%s = %t", k("skip_verify"), *hc.SkipVerify))
	}
	if hc.OverridePath {
		out = append(out, k("override_path")+" = true")
	}
	return out
}

// stripCarried removes an earlier carried-over block (begin and end lines included).
func stripCarried(b []byte) []byte {
	i := bytes.Index(b, []byte(carriedBegin+"\n"))
	if i < 0 || i > 0 && b[i-1] != '\n' {
		return b
	}
	j := bytes.Index(b[i:], []byte(carriedEnd+"\n"))
	if j < 0 {
		return b
	}
	out := append([]byte{}, b[:i]...)
	return append(out, b[i+j+len(carriedEnd)+1:]...)
}

// tomlKey renders a dotted key, quoting every part that is not a bare key.
func tomlKey(parts ...string) string {
	q := make([]string, len(parts))
	for i, p := range parts {
		bare := p != ""
		for _, r := range p {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				bare = false
			}
		}
		if bare {
			q[i] = p
		} else {
			q[i] = tomlString(p)
		}
	}
	return strings.Join(q, ".")
}

// tomlString renders a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func tomlStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
