package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// epoch is the modification time of every entry when the caller sets none
// (no SOURCE_DATE_EPOCH), so equal inputs give equal layer digests.
var epoch = time.Unix(0, 0)

const passwd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
const group = "root:x:0:\nnogroup:x:65534:\n"

// writeLayer writes the image's single layer as a gzip-compressed tar to w:
// the parent directories of every entry, /etc/passwd, /etc/group, /tmp, the
// files and the symlinks. Entries are sorted by path, dated mtime, owned by
// 0:0 with fixed modes (see addFile); the gzip header has no name and no
// time. Equal inputs and mtime give equal bytes.
func writeLayer(w io.Writer, files, links [][2]string, mtime time.Time) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return fmt.Errorf("gzip writer: %w", err)
	}
	tw := tar.NewWriter(zw)
	dirs := map[string]bool{"etc": true, "tmp": true, "root": true}
	for _, f := range files {
		addParents(dirs, f[1])
	}
	for _, l := range links {
		addParents(dirs, l[0])
	}
	var dirList []string
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList)
	for _, d := range dirList {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: mtime}); err != nil {
			return fmt.Errorf("tar dir %s: %w", d, err)
		}
	}
	for _, e := range [][2]string{{"etc/group", group}, {"etc/passwd", passwd}} { // in path order: a map would vary the layer
		name, body := e[0], e[1]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: mtime}); err != nil {
			return fmt.Errorf("tar %s: %w", name, err)
		}
		if _, err := io.WriteString(tw, body); err != nil {
			return fmt.Errorf("tar %s: %w", name, err)
		}
	}
	for _, f := range files {
		if err := addFile(tw, f[0], clean(f[1]), mtime); err != nil {
			return err
		}
	}
	for _, l := range links {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: clean(l[0]), Linkname: l[1], Mode: 0o777, ModTime: mtime}); err != nil {
			return fmt.Errorf("tar symlink %s: %w", l[0], err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("close tar: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("close gzip: %w", err)
	}
	return nil
}

// addFile copies the regular file src into the layer at dst: mode 0755 if
// any execute bit of src is set, else 0644, so the umask a file was built
// under never changes the layer.
func addFile(tw *tar.Writer, src, dst string, mtime time.Time) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", src, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("add %s: not a regular file; pass the file itself, not a directory or device", src)
	}
	mode := int64(0o644)
	if st.Mode().Perm()&0o111 != 0 {
		mode = 0o755
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: dst, Mode: mode, Size: st.Size(), ModTime: mtime}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("tar %s: %w", dst, err)
	}
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("copy %s into layer: %w", src, err)
	}
	return nil
}

// clean turns an absolute image path into a tar entry name ("/a/b" -> "a/b").
func clean(p string) string { return strings.TrimPrefix(path.Clean("/"+p), "/") }

// addParents records every parent directory of p.
func addParents(dirs map[string]bool, p string) {
	for d := path.Dir(clean(p)); d != "." && d != "/" && d != ""; d = path.Dir(d) {
		dirs[d] = true
	}
}
