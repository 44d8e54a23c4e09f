package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// isOCIArchive reports whether the tarball at path is an OCI archive (a tar
// of an OCI image layout: it has an index.json) rather than a docker-archive.
func isOCIArchive(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read %s: %w", path, err)
		}
		if strings.TrimPrefix(h.Name, "./") == "index.json" {
			return true, nil
		}
	}
}

// ociImages unpacks the OCI archive at path into a directory below tmp and
// returns its images by reference (the index's
// org.opencontainers.image.ref.name of each manifest, which must be a full
// reference such as ghcr.io/quantyroot/quantykube:v0.1.0). The images read
// their blobs from that directory: remove it only after they are pushed.
func ociImages(path, tmp string) (map[string]v1.Image, error) {
	dir, err := os.MkdirTemp(tmp, "oci-")
	if err != nil {
		return nil, err
	}
	if err := untar(path, dir); err != nil {
		return nil, err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: not an OCI image layout: %w", path, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: index.json: %w", path, err)
	}
	out := map[string]v1.Image{}
	for _, d := range m.Manifests {
		ref := d.Annotations["org.opencontainers.image.ref.name"]
		if ref == "" {
			return nil, fmt.Errorf("%s: manifest %s has no org.opencontainers.image.ref.name; build it with scripts/mkimage -format oci", path, d.Digest)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("%s: image %s: %w", path, ref, err)
		}
		out[ref] = img
	}
	return out, nil
}

// untar extracts the regular files and directories of the tar at path into
// dir, refusing entries that would land outside it.
func untar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		dst := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			w, err := os.Create(dst)
			if err != nil {
				return err
			}
			if _, err := io.Copy(w, tr); err != nil {
				w.Close()
				return fmt.Errorf("extract %s from %s: %w", h.Name, path, err)
			}
			if err := w.Close(); err != nil {
				return err
			}
		}
	}
}
