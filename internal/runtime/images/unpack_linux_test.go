package images

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func tarOf(t *testing.T, es []entry) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body))}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	return &b
}

func TestUnpackWhiteoutsLinksAndSetuid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for mknod and trusted xattrs")
	}
	dir := t.TempDir()
	_, err := Unpack(tarOf(t, []entry{
		{name: "bin/", typ: tar.TypeDir, mode: 0o755},
		{name: "bin/busybox", body: "elf", typ: tar.TypeReg, mode: 0o4755},
		{name: "bin/sh", link: "bin/busybox", typ: tar.TypeLink},
		{name: "bin/ls", link: "busybox", typ: tar.TypeSymlink},
		{name: "etc/.wh.passwd", typ: tar.TypeReg},
		{name: "opt/.wh..wh..opq", typ: tar.TypeReg},
	}), dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "bin/busybox"))
	if err != nil || fi.Mode()&os.ModeSetuid == 0 {
		t.Fatalf("setuid lost: %v %v", fi.Mode(), err)
	}
	var a, b unix.Stat_t
	unix.Stat(filepath.Join(dir, "bin/busybox"), &a)
	unix.Stat(filepath.Join(dir, "bin/sh"), &b)
	if a.Ino != b.Ino {
		t.Fatal("hard link not preserved")
	}
	var w unix.Stat_t
	if err := unix.Lstat(filepath.Join(dir, "etc/passwd"), &w); err != nil || w.Mode&unix.S_IFMT != unix.S_IFCHR || w.Rdev != 0 {
		t.Fatalf("whiteout not a 0/0 char device: %v", err)
	}
	buf := make([]byte, 8)
	n, err := unix.Lgetxattr(filepath.Join(dir, "opt"), "trusted.overlay.opaque", buf)
	if err != nil || string(buf[:n]) != "y" {
		t.Fatalf("opaque xattr: %q %v", buf[:n], err)
	}
}

func TestUnpackRejectsEscapes(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	_, err := Unpack(tarOf(t, []entry{
		{name: "link", link: outside, typ: tar.TypeSymlink},
		{name: "link/evil", body: "x", typ: tar.TypeReg},
	}), dir)
	if err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("expected symlink escape error, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "evil")); err == nil {
		t.Fatal("file written outside the layer")
	}
	// ".." is cleaned to stay inside.
	if _, err := Unpack(tarOf(t, []entry{{name: "../../x", body: "x", typ: tar.TypeReg}}), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err != nil {
		t.Fatalf("cleaned path not inside: %v", err)
	}
}
