package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// rwDir is where a container's writable overlay layer lives (on the image filesystem, not in /run).
func (s *Service) rwDir(id string) string { return filepath.Join(s.cfg.RootDir, "rw", id) }

// mountRootfs mounts an overlay of layers (bottom first) with a fresh upper dir at target.
func (s *Service) mountRootfs(id string, layers []string, target string) error {
	rw := s.rwDir(id)
	upper, work := filepath.Join(rw, "upper"), filepath.Join(rw, "work")
	for _, d := range []string{upper, work, target} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	var lower []string
	for i := len(layers) - 1; i >= 0; i-- {
		lower = append(lower, s.images.LayerDir(layers[i]))
	}
	if len(lower) == 0 {
		// overlayfs needs a lower dir; an image without layers gets an empty one.
		empty := filepath.Join(rw, "empty")
		os.MkdirAll(empty, 0o755)
		lower = []string{empty}
	}
	return s.fs.MountOverlay(lower, upper, work, target)
}

// unmountRootfs unmounts target (if mounted) and removes the container's writable layer.
func (s *Service) unmountRootfs(id, target string) error {
	var errs []error
	if target != "" {
		if err := s.fs.Unmount(target); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(s.rwDir(id)); err != nil {
		errs = append(errs, fmt.Errorf("remove writable layer of %s: %w", id, err))
	}
	return errors.Join(errs...)
}
