package images

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Remove deletes the image named by ref (ID, tag or digest) and every layer no longer
// used by an image or by keep (layer diff IDs held by live containers). Removing an
// image that does not exist is not an error.
func (s *Store) Remove(ref string, keep []string) error {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	var removed string
	err := s.update(func() error {
		if im, ok := s.lookupLocked(ref); ok {
			delete(s.images, im.ID)
			removed = im.ID
		}
		return nil
	})
	if err != nil || removed == "" {
		return err
	}
	os.Remove(filepath.Join(s.Root, "configs", hexOf(removed)+".json"))
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gcLocked(keep)
}

// GC removes layers used by no image and not in keep.
func (s *Store) GC(keep []string) error {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gcLocked(keep)
}

func (s *Store) gcLocked(keep []string) error {
	used := map[string]bool{}
	for _, k := range keep {
		used[hexOf(k)] = true
	}
	for _, im := range s.images {
		for _, l := range im.Layers {
			used[hexOf(l)] = true
		}
	}
	ents, err := os.ReadDir(filepath.Join(s.Root, "layers"))
	if err != nil {
		return fmt.Errorf("read layers: %w", err)
	}
	for _, e := range ents {
		if used[e.Name()] {
			continue
		}
		// Another process (an import) may have just unpacked it and not yet recorded its
		// image: young layers wait for a later collection.
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) < gcGrace {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.Root, "layers", e.Name())); err != nil {
			return fmt.Errorf("remove layer %s: %w", e.Name(), err)
		}
	}
	return nil
}

// Usage is the image filesystem's use, for ImageFsInfo.
type Usage struct {
	Mountpoint string
	Bytes      uint64
	Inodes     uint64
}

// gcGrace is how old an unreferenced layer must be before GC removes it.
const gcGrace = 10 * time.Minute

// usageTTL bounds how often FsUsage walks the layers (kubelet asks every few seconds).
const usageTTL = 5 * time.Second

// FsUsage reports what the layers take: bytes from each layer's recorded size, inodes by
// counting entries. The result is cached for usageTTL.
func (s *Store) FsUsage() (Usage, error) {
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	if time.Since(s.usageAt) < usageTTL {
		return s.usage, nil
	}
	u, err := s.fsUsage()
	if err == nil {
		s.usage, s.usageAt = u, time.Now()
	}
	return u, err
}

func (s *Store) fsUsage() (Usage, error) {
	u := Usage{Mountpoint: s.Root}
	root := filepath.Join(s.Root, "layers")
	ents, err := os.ReadDir(root)
	if err != nil {
		return u, fmt.Errorf("read layers: %w", err)
	}
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(root, e.Name(), "size"))
		n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		u.Bytes += n
		filepath.WalkDir(filepath.Join(root, e.Name()), func(_ string, _ os.DirEntry, _ error) error {
			u.Inodes++
			return nil
		})
	}
	return u, nil
}
