package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestBuildWritesImportableArchive builds an image from a local file and reads
// the archive back: one layer holding the file, the symlink, /etc/passwd and
// /tmp, and a config with the entrypoint and platform containerd needs.
func TestBuildWritesImportableArchive(t *testing.T) {
	dir := t.TempDir()
	bin := writeTool(t, dir)
	out := filepath.Join(dir, "img.tar")
	spec := imageSpec{
		out:        out,
		tags:       []string{"registry.k8s.io/tool:v1", "quantykube.local/tool:dev"},
		files:      [][2]string{{bin, "/usr/local/bin/tool"}},
		links:      [][2]string{{"/bin/t", "/usr/local/bin/tool"}},
		entrypoint: []string{"/usr/local/bin/tool"},
		workdir:    "/",
		arch:       "amd64",
	}
	if err := build(spec); err != nil {
		t.Fatalf("build: %v", err)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary archive left behind: %v", err)
	}
	for _, tag := range spec.tags {
		ref, err := name.NewTag(tag)
		if err != nil {
			t.Fatal(err)
		}
		img, err := tarball.ImageFromPath(out, &ref)
		if err != nil {
			t.Fatalf("read %s from archive: %v", tag, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != "linux" || cf.Architecture != "amd64" {
			t.Errorf("platform = %s/%s, want linux/amd64", cf.OS, cf.Architecture)
		}
		if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/usr/local/bin/tool" {
			t.Errorf("entrypoint = %v", cf.Config.Entrypoint)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("layers = %d, %v; want exactly 1", len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]*tar.Header{}
		eachTarEntry(t, rc, func(h *tar.Header, _ io.Reader) { got[h.Name] = h })
		rc.Close()
		if h := got["usr/local/bin/tool"]; h == nil || h.Mode&0o111 == 0 {
			t.Errorf("usr/local/bin/tool missing or not executable: %+v", h)
		}
		if h := got["bin/t"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "/usr/local/bin/tool" {
			t.Errorf("bin/t symlink wrong: %+v", h)
		}
		for _, p := range []string{"etc/passwd", "etc/group", "tmp/", "usr/local/bin/"} {
			if got[p] == nil {
				t.Errorf("%s missing from the layer", p)
			}
		}
	}
}

func TestBadInputIsRejected(t *testing.T) {
	if _, err := parsePairs([]string{"nocolon"}, "-add", "SRC:DST"); err == nil {
		t.Error("parsePairs accepted a value without ':'")
	}
	err := build(imageSpec{out: filepath.Join(t.TempDir(), "x.tar"), tags: []string{"UPPER CASE"}})
	if err == nil {
		t.Error("build accepted an invalid tag")
	}
	dir := t.TempDir()
	err = build(imageSpec{out: filepath.Join(dir, "x.tar"), tags: []string{"a.b/c:d"}, files: [][2]string{{dir, "/x"}}})
	if err == nil {
		t.Error("build accepted a directory as a file")
	}
}

// writeTool writes a small executable into dir, the file the test images carry.
func writeTool(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// eachTarEntry calls fn with each entry of the tar stream r (and a reader
// of its content), failing the test on a read error.
func eachTarEntry(t *testing.T, r io.Reader, fn func(h *tar.Header, content io.Reader)) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(h, tr)
	}
}
