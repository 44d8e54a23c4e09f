package images

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// ErrNotFound is returned by Pull when no endpoint has the image.
var ErrNotFound = errors.New("image not found")

// Auth is registry credentials from the CRI request.
type Auth struct {
	Username, Password, Auth, IdentityToken, RegistryToken string
}

func (a *Auth) authenticator() authn.Authenticator {
	if a == nil || *a == (Auth{}) {
		return authn.Anonymous
	}
	return authn.FromConfig(authn.AuthConfig{Username: a.Username, Password: a.Password, Auth: a.Auth,
		IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken})
}

// endpoint is one place to pull from.
type endpoint struct {
	host     string
	insecure bool
}

// endpoints lists where ref is tried: the configured mirrors in order, then upstream
// unless the mirror entry says skip_upstream.
func (s *Store) endpoints(r Ref) []endpoint {
	var out []endpoint
	m, ok := s.Mirrors[r.Registry]
	for _, e := range m.Endpoints {
		host := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(e, "https://"), "http://"), "/")
		out = append(out, endpoint{host: host, insecure: strings.HasPrefix(e, "http://")})
	}
	if !ok || !m.SkipUpstream {
		out = append(out, endpoint{host: r.Registry})
	}
	return out
}

// Pull fetches ref (for linux/amd64 or the host platform) and returns the stored image.
// The image keeps ref's upstream name even when a mirror served it.
func (s *Store) Pull(ctx context.Context, ref string, auth *Auth) (Image, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return Image{}, err
	}
	lockAny, _ := s.pulls.LoadOrStore(r.String(), &sync.Mutex{})
	lock := lockAny.(*sync.Mutex)
	lock.Lock()
	defer lock.Unlock()

	var errs []error
	for _, ep := range s.endpoints(r) {
		nr, err := r.at(ep.host, ep.insecure)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ep.host, err))
			continue
		}
		opts := []remote.Option{remote.WithContext(ctx), remote.WithPlatform(v1.Platform{OS: "linux", Architecture: hostArch()})}
		if ep.host == r.Registry {
			opts = append(opts, remote.WithAuth(auth.authenticator()))
		}
		desc, err := remote.Get(nr, opts...)
		if err != nil {
			slog.Debug("pull endpoint failed", "ref", r.String(), "endpoint", ep.host, "err", err)
			errs = append(errs, fmt.Errorf("%s: %w", ep.host, err))
			continue
		}
		img, err := desc.Image()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: resolve platform image: %w", ep.host, err))
			continue
		}
		return s.store(r, desc.Digest.String(), img)
	}
	notFound := len(errs) > 0
	for _, e := range errs {
		var te *transport.Error
		if !errors.As(e, &te) || te.StatusCode != 404 && !slices.ContainsFunc(te.Errors, func(d transport.Diagnostic) bool {
			return d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode
		}) {
			notFound = false
		}
	}
	err = errors.Join(errs...)
	if notFound {
		return Image{}, fmt.Errorf("pull %s: %w: %v", r, ErrNotFound, err)
	}
	return Image{}, fmt.Errorf("pull %s: %w", r, err)
}

// store unpacks img's missing layers, writes its config and records it under r.
func (s *Store) store(r Ref, manifestDigest string, img v1.Image) (Image, error) {
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	cfgName, err := img.ConfigName()
	if err != nil {
		return Image{}, fmt.Errorf("config digest of %s: %w", r, err)
	}
	rawCfg, err := img.RawConfigFile()
	if err != nil {
		return Image{}, fmt.Errorf("fetch config of %s: %w", r, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return Image{}, fmt.Errorf("layers of %s: %w", r, err)
	}
	im := Image{ID: cfgName.String()}
	for _, l := range layers {
		diffID, err := l.DiffID()
		if err != nil {
			return Image{}, fmt.Errorf("diff id of a layer of %s: %w", r, err)
		}
		if sz, err := l.Size(); err == nil {
			im.Size += uint64(sz)
		}
		im.Layers = append(im.Layers, diffID.String())
		if _, err := os.Stat(filepath.Dir(s.LayerDir(diffID.String()))); err == nil {
			continue
		}
		if err := s.unpackLayer(l, diffID.String()); err != nil {
			return Image{}, fmt.Errorf("unpack layer %s of %s: %w", diffID, r, err)
		}
	}
	cfgPath := filepath.Join(s.Root, "configs", hexOf(im.ID)+".json")
	if err := os.WriteFile(cfgPath+".tmp", rawCfg, 0o600); err != nil {
		return Image{}, fmt.Errorf("write image config: %w", err)
	}
	if err := os.Rename(cfgPath+".tmp", cfgPath); err != nil {
		return Image{}, fmt.Errorf("commit image config: %w", err)
	}

	tag := ""
	if r.Tag != "" {
		tag = r.String()
	}
	digestRef := r.Name() + "@" + manifestDigest
	var out Image
	err = s.update(func() error {
		// A tag names one image: take it away from any other image.
		for id, other := range s.images {
			if id == im.ID || tag == "" {
				continue
			}
			if i := slices.Index(other.RepoTags, tag); i >= 0 {
				other.RepoTags = slices.Delete(other.RepoTags, i, i+1)
				if len(other.RepoTags) == 0 && len(other.RepoDigests) == 0 {
					delete(s.images, id)
				}
			}
		}
		cur, ok := s.images[im.ID]
		if !ok {
			cur = &im
			s.images[im.ID] = cur
		}
		if tag != "" && !slices.Contains(cur.RepoTags, tag) {
			cur.RepoTags = append(cur.RepoTags, tag)
		}
		if !slices.Contains(cur.RepoDigests, digestRef) {
			cur.RepoDigests = append(cur.RepoDigests, digestRef)
		}
		out = *cur
		return nil
	})
	return out, err
}
