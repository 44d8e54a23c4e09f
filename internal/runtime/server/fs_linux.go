package server

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/quantyroot/quantykube/internal/runtime/netns"
)

// hostFS is the Filesystem of the host: mount(2), umount(2) and pinned namespaces.
type hostFS struct{}

// overlayOptsMax is the longest mount option string mount(2) takes (one page, with room).
const overlayOptsMax = 4000

func (hostFS) MountOverlay(lower []string, upper, work, target string) error {
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(lower, ":"), upper, work)
	if len(opts) > overlayOptsMax {
		return fmt.Errorf("image has too many layers (%d) for one overlay mount", len(lower))
	}
	if err := unix.Mount("overlay", target, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay at %s: %w", target, err)
	}
	return nil
}

func (hostFS) MountShm(dir string) error {
	if err := unix.Mount("shm", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777,size=65536k"); err != nil {
		return fmt.Errorf("mount shm tmpfs: %w", err)
	}
	return nil
}

func (hostFS) Unmount(target string) error {
	if err := unix.Unmount(target, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	return nil
}

// maxStackedMounts bounds UnmountAll: more mounts stacked at one path than this are not
// the runtime's.
const maxStackedMounts = 4

func (hostFS) UnmountAll(p string) {
	for i := 0; i < maxStackedMounts; i++ {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
			return
		}
	}
}

func (hostFS) CreateNetNS(path string) error { return netns.Create(path) }
func (hostFS) RemoveNetNS(path string) error { return netns.Remove(path) }

// fileExists reports whether p exists.
func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
