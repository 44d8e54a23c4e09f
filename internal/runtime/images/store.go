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
	"syscall"
	"time"

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
	Root string
	// Registry is where pulls go (its Route per registry host) and the configured
	// credentials; the zero value pulls every image from its own registry.
	Registry config.Registry
	mu       sync.Mutex
	images   map[string]*Image // by ID
	// indexMod and indexSize identify the index.json version in memory.
	indexMod  time.Time
	indexSize int64
	pulls     sync.Map // per-reference lock: string -> *sync.Mutex

	// gcMu keeps layer garbage collection out while a pull is storing layers (read side),
	// so a layer a pull just found present cannot vanish before its image is recorded.
	gcMu sync.RWMutex

	usageMu sync.Mutex
	usage   Usage
	usageAt time.Time
}

// Open loads the store at root, creating it if missing; pulls follow reg
// (config.Config.Registries).
func Open(root string, reg config.Registry) (*Store, error) {
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
	s := &Store{Root: root, Registry: reg, images: map[string]*Image{}}
	if err := s.reloadLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

// reloadLocked reads index.json (if it changed since the last read). Another process
// (`quantykube runtime import`) may have rewritten it. Caller holds s.mu.
func (s *Store) reloadLocked() error {
	p := filepath.Join(s.Root, "index.json")
	fi, err := os.Stat(p)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat image index: %w", err)
	}
	if fi.ModTime().Equal(s.indexMod) && fi.Size() == s.indexSize {
		return nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("read image index: %w", err)
	}
	var list []*Image
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("decode %s (delete it to start empty): %w", p, err)
	}
	s.images = map[string]*Image{}
	for _, im := range list {
		s.images[im.ID] = im
	}
	s.indexMod, s.indexSize = fi.ModTime(), fi.Size()
	return nil
}

// update runs fn with the index current and exclusively locked against other processes
// (flock on index.lock), then saves it. Caller must not hold s.mu.
func (s *Store) update(fn func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	lf, err := os.OpenFile(filepath.Join(s.Root, "index.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open index lock: %w", err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock image index: %w", err)
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	if err := s.reloadLocked(); err != nil {
		return err
	}
	if err := fn(); err != nil {
		return err
	}
	return s.saveLocked()
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
	if fi, err := os.Stat(filepath.Join(s.Root, "index.json")); err == nil {
		s.indexMod, s.indexSize = fi.ModTime(), fi.Size()
	}
	return nil
}

// List returns copies of all images sorted by ID.
func (s *Store) List() []Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.reloadLocked()
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
	_ = s.reloadLocked()
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
	if im, ok := s.Lookup(id); !ok || im.Pinned == pinned {
		return nil
	}
	return s.update(func() error {
		if im, ok := s.images[id]; ok {
			im.Pinned = pinned
		}
		return nil
	})
}

// Hold keeps layer garbage collection away until release is called: callers hold it from
// looking an image up until the sandbox or container using its layers is recorded.
// It must not be held across a Pull.
func (s *Store) Hold() (release func()) {
	s.gcMu.RLock()
	return s.gcMu.RUnlock
}
