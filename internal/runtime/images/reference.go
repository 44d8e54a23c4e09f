package images

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Ref is a parsed image reference in the normalized form CRI clients see:
// "docker.io/library/busybox:latest", "registry.k8s.io/pause@sha256:...".
type Ref struct {
	Registry   string // "docker.io", "registry.k8s.io"
	Repository string // "library/busybox"
	Tag        string // empty for digest references
	Digest     string // "sha256:..." for digest references
}

// ParseRef parses and normalizes a user-supplied image reference. A reference without
// tag or digest gets ":latest"; a reference without registry gets docker.io.
func ParseRef(s string) (Ref, error) {
	if s == "" {
		return Ref{}, fmt.Errorf("empty image reference: give a name like docker.io/library/busybox:1.36")
	}
	r, err := name.ParseReference(s, name.WeakValidation)
	if err != nil {
		return Ref{}, fmt.Errorf("image reference %q is not valid: %w", s, err)
	}
	out := Ref{Registry: r.Context().RegistryStr(), Repository: r.Context().RepositoryStr()}
	if out.Registry == name.DefaultRegistry {
		out.Registry = "docker.io"
	}
	switch t := r.(type) {
	case name.Tag:
		out.Tag = t.TagStr()
		// "name:tag@digest" parses as a digest; keep only the digest then.
	case name.Digest:
		out.Digest = t.DigestStr()
	}
	return out, nil
}

// Name is the repository without tag or digest: "docker.io/library/busybox".
func (r Ref) Name() string { return r.Registry + "/" + r.Repository }

// String renders the normalized reference.
func (r Ref) String() string {
	if r.Digest != "" {
		return r.Name() + "@" + r.Digest
	}
	return r.Name() + ":" + r.Tag
}

// at returns the go-containerregistry reference of r's repository on another
// registry host, with tagOrDigest (":v1" or "@sha256:...") instead of r's own.
func (r Ref) at(host string, insecure bool, tagOrDigest string) (name.Reference, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	s := host + "/" + r.Repository + tagOrDigest
	if host == "docker.io" {
		s = strings.TrimPrefix(s, "docker.io/")
	}
	return name.ParseReference(s, opts...)
}
