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

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/quantyroot/quantykube/internal/runtime/config"
)

// ErrNotFound is returned by Pull when no endpoint has the image.
var ErrNotFound = errors.New("image not found")

// Pull fetches ref (for linux and the host's architecture) and returns the stored
// image. The image keeps ref's upstream name even when a mirror served it.
//
// Where it goes is the registry configuration's route for ref's registry (see
// config.Registry): a tag is resolved to a digest by the first endpoint with the
// resolve capability that knows it, then the content is fetched by that digest from
// the endpoints with the pull capability, in order, until one serves all of it. A
// digest reference skips the resolve. Each endpoint gets the credentials credentialsFor
// picks. The error of a failed pull names the registry, where its configuration came
// from and every endpoint tried with its own error.
func (s *Store) Pull(ctx context.Context, ref string, auth *Auth) (Image, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return Image{}, err
	}
	lockAny, _ := s.pulls.LoadOrStore(r.String(), &sync.Mutex{})
	lock := lockAny.(*sync.Mutex)
	lock.Lock()
	defer lock.Unlock()

	route, err := s.Registry.Route(r.Registry)
	if err != nil {
		return Image{}, fmt.Errorf("pull %s: registry configuration of %s: %w", r, r.Registry, err)
	}
	var eps []endpoint
	for _, e := range route.Endpoints {
		ep, err := newEndpoint(e, r.Registry, auth, &s.Registry)
		if err != nil {
			return Image{}, fmt.Errorf("pull %s: %s of %s (%s): %w", r, e, r.Registry, sourceOf(route), err)
		}
		defer ep.done()
		eps = append(eps, ep)
	}
	platform := remote.WithPlatform(v1.Platform{OS: "linux", Architecture: hostArch()})
	get := func(ep endpoint, at string) (*remote.Descriptor, error) {
		nr, err := r.at(ep.Host(), ep.PlainHTTP(), at)
		if err != nil {
			return nil, err
		}
		return remote.Get(nr, append([]remote.Option{remote.WithContext(ctx), platform}, ep.opts...)...)
	}

	var errs pullErrors
	digest, resolvedAt := r.Digest, -1
	var resolved *remote.Descriptor
	if digest == "" {
		if resolved, resolvedAt, errs = resolve(r, eps, get); resolved == nil {
			return Image{}, s.failed(r, route, errs, "resolve")
		}
		digest = resolved.Digest.String()
	}
	for i, ep := range eps {
		if !ep.Has(config.CapPull) {
			continue
		}
		desc := resolved
		if i != resolvedAt {
			if desc, err = get(ep, "@"+digest); err != nil {
				slog.Debug("pull failed", "ref", r.String(), "endpoint", ep.String(), "credentials", ep.creds, "err", err)
				errs = append(errs, fmt.Errorf("%s: %w", ep, err))
				continue
			}
		}
		img, err := desc.Image()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: resolve platform image: %w", ep, err))
			continue
		}
		im, err := s.store(r, digest, img)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ep, err))
			continue
		}
		if ep.Mirror {
			slog.Debug("pulled through mirror", "ref", r.String(), "endpoint", ep.String())
		}
		return im, nil
	}
	return Image{}, s.failed(r, route, errs, "pull")
}

// resolve turns r's tag into a descriptor at the first endpoint that may resolve and
// knows it; it returns the endpoint's index, or nil and every endpoint's error.
func resolve(r Ref, eps []endpoint, get func(endpoint, string) (*remote.Descriptor, error)) (*remote.Descriptor, int, pullErrors) {
	var errs pullErrors
	for i, ep := range eps {
		if !ep.Has(config.CapResolve) {
			continue
		}
		desc, err := get(ep, ":"+r.Tag)
		if err != nil {
			slog.Debug("resolve failed", "ref", r.String(), "endpoint", ep.String(), "credentials", ep.creds, "err", err)
			errs = append(errs, fmt.Errorf("%s: %w", ep, err))
			continue
		}
		return desc, i, errs
	}
	return nil, -1, errs
}

// failed builds the error of a pull no endpoint could serve; ErrNotFound when every
// endpoint said it does not have the image.
func (s *Store) failed(r Ref, route config.Route, errs pullErrors, verb string) error {
	if len(errs) == 0 {
		return fmt.Errorf("pull %s: no endpoint of %s (%s) has the %s capability: add it to a host's capabilities", r, r.Registry, sourceOf(route), verb)
	}
	notFound := true
	for _, e := range errs {
		var te *transport.Error
		if !errors.As(e, &te) || te.StatusCode != 404 && !slices.ContainsFunc(te.Errors, func(d transport.Diagnostic) bool {
			return d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode
		}) {
			notFound = false
		}
	}
	if notFound {
		return fmt.Errorf("pull %s from %s (%s): %w: %w", r, r.Registry, sourceOf(route), ErrNotFound, errs)
	}
	return fmt.Errorf("pull %s from %s (%s): %w", r, r.Registry, sourceOf(route), errs)
}

func sourceOf(rt config.Route) string {
	if rt.Source == "" {
		return "no registry configuration"
	}
	return rt.Source
}

// pullErrors are the errors of each endpoint tried, on one line.
type pullErrors []error

func (p pullErrors) Error() string {
	var b strings.Builder
	for i, e := range p {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.ReplaceAll(e.Error(), "\n", " "))
	}
	return b.String()
}

func (p pullErrors) Unwrap() []error { return p }

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
