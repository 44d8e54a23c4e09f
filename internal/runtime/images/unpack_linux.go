package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// Whiteout conventions of the OCI layer format.
const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
)

// unpackLayer extracts l into layers/<diffid>/fs through a temporary directory.
func (s *Store) unpackLayer(l v1.Layer, diffID string) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return fmt.Errorf("open layer: %w", err)
	}
	defer rc.Close()
	tmp, err := os.MkdirTemp(filepath.Join(s.Root, "tmp"), "layer-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	fsDir := filepath.Join(tmp, "fs")
	if err := os.Mkdir(fsDir, 0o755); err != nil {
		return fmt.Errorf("create layer root: %w", err)
	}
	size, err := Unpack(rc, fsDir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "size"), []byte(strconv.FormatInt(size, 10)), 0o600); err != nil {
		return fmt.Errorf("write layer size: %w", err)
	}
	if err := os.Chmod(tmp, 0o711); err != nil {
		return fmt.Errorf("chmod layer dir: %w", err)
	}
	if err := os.Rename(tmp, filepath.Dir(s.LayerDir(diffID))); err != nil {
		return fmt.Errorf("commit layer: %w", err)
	}
	return nil
}

// Unpack extracts a layer tar into dir as an overlayfs lower directory: a ".wh.NAME" entry
// becomes a 0/0 character device NAME, a ".wh..wh..opq" entry marks its directory opaque
// (trusted.overlay.opaque=y). Ownership, modes (including setuid), times and xattrs are kept.
// No entry may leave dir: ".." components and paths through symlinks are rejected.
// It returns the bytes of regular file content written.
func Unpack(r io.Reader, dir string) (int64, error) {
	tr := tar.NewReader(r)
	u := unpacker{dir: dir}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return u.size, fmt.Errorf("read layer tar: %w", err)
		}
		if err := u.entry(tr, h); err != nil {
			return u.size, err
		}
	}
	// Directory times last, deepest first: creating entries inside changed them.
	for i := len(u.dirTimes) - 1; i >= 0; i-- {
		t := unix.NsecToTimespec(u.dirTimes[i].t.UnixNano())
		_ = unix.UtimesNanoAt(unix.AT_FDCWD, u.dirTimes[i].path, []unix.Timespec{t, t}, unix.AT_SYMLINK_NOFOLLOW)
	}
	return u.size, nil
}

// unpacker is one Unpack in progress.
type unpacker struct {
	dir      string
	size     int64
	dirTimes []dirTime
}

type dirTime struct {
	path string
	t    time.Time
}

// entry extracts one tar entry: a whiteout, an opaque marker or a file of any type.
func (u *unpacker) entry(tr io.Reader, h *tar.Header) error {
	rel := filepath.Clean("/" + h.Name)
	if rel == "/" {
		return nil
	}
	parent, base := filepath.Split(rel)
	if err := checkNoSymlink(u.dir, parent); err != nil {
		return fmt.Errorf("entry %q: %w", h.Name, err)
	}
	pdir := filepath.Join(u.dir, parent)
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		return fmt.Errorf("create parent of %q: %w", h.Name, err)
	}
	if base == opaqueMarker {
		if err := unix.Lsetxattr(pdir, "trusted.overlay.opaque", []byte("y"), 0); err != nil {
			return fmt.Errorf("mark %q opaque: %w", parent, err)
		}
		return nil
	}
	if strings.HasPrefix(base, whiteoutPrefix) {
		p := filepath.Join(pdir, strings.TrimPrefix(base, whiteoutPrefix))
		os.RemoveAll(p)
		if err := unix.Mknod(p, unix.S_IFCHR, 0); err != nil {
			return fmt.Errorf("whiteout %q: %w", h.Name, err)
		}
		return nil
	}
	p := filepath.Join(u.dir, rel)
	if fi, err := os.Lstat(p); err == nil && !(fi.IsDir() && h.Typeflag == tar.TypeDir) {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("replace %q: %w", h.Name, err)
		}
	}
	made, err := u.create(tr, h, p)
	if err != nil || !made {
		return err
	}
	return u.setMetadata(h, p)
}

// create makes the file of h at p. made is false for entries that need no metadata of
// their own: hard links (they share the target's inode) and headers that carry no file.
func (u *unpacker) create(tr io.Reader, h *tar.Header, p string) (made bool, err error) {
	switch h.Typeflag {
	case tar.TypeDir:
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return false, fmt.Errorf("mkdir %q: %w", h.Name, err)
		}
	case tar.TypeReg, tar.TypeRegA:
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return false, fmt.Errorf("create %q: %w", h.Name, err)
		}
		n, err := io.Copy(f, tr)
		u.size += n
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return false, fmt.Errorf("write %q: %w", h.Name, err)
		}
	case tar.TypeSymlink:
		if err := os.Symlink(h.Linkname, p); err != nil {
			return false, fmt.Errorf("symlink %q: %w", h.Name, err)
		}
	case tar.TypeLink:
		return false, u.hardLink(h, p)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		m := uint32(unix.S_IFIFO)
		if h.Typeflag == tar.TypeChar {
			m = unix.S_IFCHR
		} else if h.Typeflag == tar.TypeBlock {
			m = unix.S_IFBLK
		}
		if err := unix.Mknod(p, m|uint32(h.Mode&0o7777), int(unix.Mkdev(uint32(h.Devmajor), uint32(h.Devminor)))); err != nil {
			return false, fmt.Errorf("mknod %q: %w", h.Name, err)
		}
	default:
		return false, nil // pax/global headers and unknown types carry no file
	}
	return true, nil
}

// hardLink links p to the entry's target inside the layer.
func (u *unpacker) hardLink(h *tar.Header, p string) error {
	target := filepath.Clean("/" + h.Linkname)
	tparent, _ := filepath.Split(target)
	if err := checkNoSymlink(u.dir, tparent); err != nil {
		return fmt.Errorf("hard link %q: %w", h.Name, err)
	}
	if err := os.Link(filepath.Join(u.dir, target), p); err != nil {
		return fmt.Errorf("hard link %q -> %q: %w", h.Name, h.Linkname, err)
	}
	return nil
}

// setMetadata applies h's owner, xattrs, mode and times to p (directory times later).
func (u *unpacker) setMetadata(h *tar.Header, p string) error {
	if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
		return fmt.Errorf("chown %q: %w", h.Name, err)
	}
	for k, v := range h.PAXRecords {
		if x, ok := strings.CutPrefix(k, "SCHILY.xattr."); ok {
			if err := unix.Lsetxattr(p, x, []byte(v), 0); err != nil && !errors.Is(err, unix.ENOTSUP) && !errors.Is(err, unix.EPERM) {
				return fmt.Errorf("xattr %s on %q: %w", x, h.Name, err)
			}
		}
	}
	if h.Typeflag != tar.TypeSymlink {
		// After chown, which clears setuid/setgid.
		if err := unix.Chmod(p, uint32(h.Mode&0o7777)); err != nil {
			return fmt.Errorf("chmod %q: %w", h.Name, err)
		}
	}
	if h.Typeflag == tar.TypeDir {
		u.dirTimes = append(u.dirTimes, dirTime{p, h.ModTime})
		return nil
	}
	ts := []unix.Timespec{unix.NsecToTimespec(h.AccessTime.UnixNano()), unix.NsecToTimespec(h.ModTime.UnixNano())}
	if h.AccessTime.IsZero() {
		ts[0] = ts[1]
	}
	_ = unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW)
	return nil
}

// checkNoSymlink fails when any existing component of rel below root is a symlink.
func checkNoSymlink(root, rel string) error {
	cur := root
	for _, c := range strings.Split(strings.Trim(rel, "/"), "/") {
		if c == "" {
			continue
		}
		cur = filepath.Join(cur, c)
		fi, err := os.Lstat(cur)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("path goes through symlink %s (refusing to write outside the layer)", cur)
		}
	}
	return nil
}
