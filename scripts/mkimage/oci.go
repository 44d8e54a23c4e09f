package main

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Annotations an OCI archive's index gives each image: the full reference
// under both the OCI key and containerd's, so `ctr images import` names the
// image by it (containerd reads io.containerd.image.name first) and
// `skopeo copy oci-archive:` finds it by org.opencontainers.image.ref.name.
const (
	annotationRefName        = "org.opencontainers.image.ref.name"
	annotationContainerdName = "io.containerd.image.name"
)

// writeOCIArchive writes img to out as an OCI archive: a tar of an OCI image
// layout (oci-layout, index.json, blobs/sha256/...) whose index holds one
// manifest entry per tag, in the order given, with the image's platform. Entries are sorted, dated
// mtime, owned by 0:0, mode 0644 (directories 0755), uncompressed: equal images give equal archives.
func writeOCIArchive(out string, img v1.Image, tags []string, mtime time.Time) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".oci-layout-")
	if err != nil {
		return fmt.Errorf("layout dir: %w", err)
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write layout %s: %w", dir, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	platform := v1.Platform{OS: cf.OS, Architecture: cf.Architecture}
	for _, t := range tags {
		ann := map[string]string{annotationRefName: t, annotationContainerdName: t}
		if err := p.AppendImage(img, layout.WithAnnotations(ann), layout.WithPlatform(platform)); err != nil {
			return fmt.Errorf("add %s to the layout: %w", t, err)
		}
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	if err := tarDir(f, dir, mtime); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", out, err)
	}
	return nil
}

// tarDir writes the regular files and directories below dir to w, sorted by
// path, dated mtime, as an uncompressed tar.
func tarDir(w io.Writer, dir string, mtime time.Time) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(paths)
	tw := tar.NewWriter(w)
	for _, p := range paths {
		rel, _ := filepath.Rel(dir, p)
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.IsDir() {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: 0o755, ModTime: mtime}); err != nil {
				return err
			}
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: st.Size(), ModTime: mtime}); err != nil {
			return err
		}
		if err := copyFile(tw, p); err != nil {
			return err
		}
	}
	return tw.Close()
}

func copyFile(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
