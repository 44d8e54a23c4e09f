package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
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
		empty := filepath.Join(rw, "empty")
		os.MkdirAll(empty, 0o755)
		lower = []string{empty}
	}
	if len(lower) == 1 {
		// overlayfs needs two lower dirs or an upper; we have an upper, one lower is fine.
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(lower, ":"), upper, work)
	if len(opts) > 4000 {
		return fmt.Errorf("image has too many layers (%d) for one overlay mount", len(layers))
	}
	if err := unix.Mount("overlay", target, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay at %s: %w", target, err)
	}
	return nil
}

// unmountRootfs unmounts target (if mounted) and removes the container's writable layer.
func (s *Service) unmountRootfs(id, target string) error {
	var errs []error
	if target != "" {
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", target, err))
		}
	}
	if err := os.RemoveAll(s.rwDir(id)); err != nil {
		errs = append(errs, fmt.Errorf("remove writable layer of %s: %w", id, err))
	}
	return errors.Join(errs...)
}

// unmountAll detaches p if it is a mount point (idempotent).
func unmountAll(p string) {
	for i := 0; i < 4; i++ {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
			return
		}
	}
}
