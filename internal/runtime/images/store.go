// Package images pulls, unpacks, indexes and removes container images.
//
// Layout below Root:
//
//	layers/<diffid-hex>/fs   one unpacked layer (overlayfs lower dir, whiteouts as 0/0 char devices)
//	layers/<diffid-hex>/size bytes used by fs
//	configs/<id-hex>.json    the image config blob
//	index.json               every image: ID, tags, digests, layers
//
// Invariants: a layer directory exists only when completely unpacked (it is unpacked in a
// temporary directory and renamed into place); index.json is rewritten atomically after
// every change and lists only images whose layers and config are present.
package images

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/quantyroot/quantykube/internal/runtime/config"
)

// Image is one stored image.
type Image struct {
	// ID is the config digest, "sha256:<hex>".
	ID          string   `json:"id"`
	RepoTags    []string `json:"repo_tags"`
	RepoDigests []string `json:"repo_digests"`
	// Layers are diff IDs, bottom first.
	Layers []string `json:"layers"`
	// Size is the sum of the compressed layer sizes.
	Size   uint64 `json:"size"`
	Pinned bool   `json:"pinned,omitempty"`
}

// Store is the image store.
type Store struct {
	Root    string
	Mirrors map[string]config.Mirror
	mu      sync.Mutex
	images  map[string]*Image // by ID
	pulls   sync.Map          // per-reference lock: string -> *sync.Mutex
}

// Open loads the store at root, creating it if missing.
func Open(root string, mirrors map[string]config.Mirror) (*Store, error) {
	for _, d := range []string{"layers", "configs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o711); err != nil {
			return nil, fmt.Errorf("create image store: %w", err)
		}
	}
	// Leftovers of interrupted unpacks.
	ents, _ := os.ReadDir(filepath.Join(root, "tmp"))
	for _, e := range ents {
		os.RemoveAll(filepath.Join(root, "tmp", e.Name()))
	}
	s := &Store{Root: root, Mirrors: mirrors, images: map[string]*Image{}}
	b, err := os.ReadFile(filepath.Join(root, "index.json"))
	if err == nil {
		var list []*Image
		if err := json.Unmarshal(b, &list); err != nil {
			return nil, fmt.Errorf("decode %s/index.json (delete it to start empty): %w", root, err)
		}
		for _, im := range list {
			s.images[im.ID] = im
		}
	} else if !os.IsNotExist(err) {
		return nil, fmt.Errorf("read image index: %w", err)
	}
	return s, nil
}

func hexOf(digest string) string { return strings.TrimPrefix(digest, "sha256:") }

// LayerDir is the unpacked directory of a layer.
func (s *Store) LayerDir(diffID string) string {
	return filepath.Join(s.Root, "layers", hexOf(diffID), "fs")
}

// saveLocked writes index.json atomically. Caller holds s.mu.
func (s *Store) saveLocked() error {
	list := make([]*Image, 0, len(s.images))
	for _, im := range s.images {
		list = append(list, im)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	b, err := json.MarshalIndent(list, "", " ")
	if err != nil {
		return fmt.Errorf("encode image index: %w", err)
	}
	tmp := filepath.Join(s.Root, "index.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write image index: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(s.Root, "index.json")); err != nil {
		return fmt.Errorf("commit image index: %w", err)
	}
	return nil
}

// List returns copies of all images sorted by ID.
func (s *Store) List() []Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Image, 0, len(s.images))
	for _, im := range s.images {
		out = append(out, *im)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Lookup finds an image by ID ("sha256:<hex>" or "<hex>", or a unique hex prefix of at
// least 12 characters), by tag or by digest reference. ok is false when none matches.
func (s *Store) Lookup(ref string) (Image, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookupLocked(ref)
}

func (s *Store) lookupLocked(ref string) (Image, bool) {
	if ref == "" {
		return Image{}, false
	}
	if im, ok := s.images[ref]; ok {
		return *im, true
	}
	if im, ok := s.images["sha256:"+ref]; ok {
		return *im, true
	}
	if r, err := ParseRef(ref); err == nil {
		full := r.String()
		for _, im := range s.images {
			if slices.Contains(im.RepoTags, full) || slices.Contains(im.RepoDigests, full) {
				return *im, true
			}
		}
	}
	h := hexOf(ref)
	if len(h) >= 12 && isHex(h) {
		var found *Image
		for id, im := range s.images {
			if strings.HasPrefix(hexOf(id), h) {
				if found != nil {
					return Image{}, false
				}
				found = im
			}
		}
		if found != nil {
			return *found, true
		}
	}
	return Image{}, false
}

func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Config returns the image config of image id.
func (s *Store) Config(id string) (*v1.ConfigFile, error) {
	f, err := os.Open(filepath.Join(s.Root, "configs", hexOf(id)+".json"))
	if err != nil {
		return nil, fmt.Errorf("open config of image %s: %w", id, err)
	}
	defer f.Close()
	c, err := v1.ParseConfigFile(f)
	if err != nil {
		return nil, fmt.Errorf("parse config of image %s: %w", id, err)
	}
	return c, nil
}

// SetPinned marks an image as pinned (never garbage-collected by kubelet).
func (s *Store) SetPinned(id string, pinned bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if im, ok := s.images[id]; ok && im.Pinned != pinned {
		im.Pinned = pinned
		return s.saveLocked()
	}
	return nil
}
