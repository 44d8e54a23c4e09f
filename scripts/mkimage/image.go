package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageSpec is everything one image is made of.
type imageSpec struct {
	out        string
	tags       []string
	files      [][2]string // host source, image destination
	links      [][2]string // image path, symlink target
	envs       []string
	entrypoint []string
	cmd        []string
	workdir    string
	arch       string
	format     string // "docker" (docker-archive, the default) or "oci" (OCI archive)
	// created dates the image (its config's created) and every tar entry
	// of the layer and the archive; zero: no created, entries at epoch.
	created time.Time
	// digestFile, when set (OCI archives only), receives the image's
	// manifest digest ("sha256:<hex>\n"): the digest a reference pinned
	// to this image names.
	digestFile string
}

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// build writes the image described by s to s.out as a docker-archive, or as
// an OCI archive when s.format is "oci".
func build(s imageSpec) error {
	if s.format != "" && s.format != "docker" && s.format != "oci" {
		return fmt.Errorf("-format %q: want docker or oci", s.format)
	}
	if s.digestFile != "" && s.format != "oci" {
		return fmt.Errorf("-digest-file needs -format oci: only an OCI archive keeps the manifest the digest names")
	}
	mtime := epoch
	if !s.created.IsZero() {
		mtime = s.created.UTC()
	}
	refs := make([]name.Reference, 0, len(s.tags))
	for _, t := range s.tags {
		ref, err := name.ParseReference(t, name.StrictValidation)
		if err != nil {
			return fmt.Errorf("tag %q: %w (use a full reference such as registry.k8s.io/pause:3.10.2)", t, err)
		}
		refs = append(refs, ref)
	}
	if err := os.MkdirAll(filepath.Dir(s.out), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(s.out), err)
	}
	layerPath := s.out + ".layer.tmp"
	defer os.Remove(layerPath)
	lf, err := os.Create(layerPath)
	if err != nil {
		return fmt.Errorf("create %s: %w", layerPath, err)
	}
	if err := writeLayer(lf, s.files, s.links, mtime); err != nil {
		lf.Close()
		return fmt.Errorf("write layer %s: %w", layerPath, err)
	}
	if err := lf.Close(); err != nil {
		return fmt.Errorf("close %s: %w", layerPath, err)
	}
	var layerOpts []tarball.LayerOption
	base := empty.Image
	if s.format == "oci" { // OCI media types throughout, not Docker's schema 2
		layerOpts = append(layerOpts, tarball.WithMediaType(types.OCILayer))
		base = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	layer, err := tarball.LayerFromFile(layerPath, layerOpts...)
	if err != nil {
		return fmt.Errorf("read layer %s: %w", layerPath, err)
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = s.arch
	cf.Config = v1.Config{
		Entrypoint: s.entrypoint,
		Cmd:        s.cmd,
		Env:        append([]string{defaultPath}, s.envs...),
		WorkingDir: s.workdir,
	}
	if !s.created.IsZero() {
		cf.Created = v1.Time{Time: mtime}
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return fmt.Errorf("set config: %w", err)
	}
	tmp := s.out + ".tmp"
	if err := writeArchive(tmp, img, refs, s.format, mtime); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, s.out); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	if s.digestFile != "" {
		d, err := img.Digest()
		if err != nil {
			return fmt.Errorf("manifest digest: %w", err)
		}
		if err := os.WriteFile(s.digestFile, []byte(d.String()+"\n"), 0o644); err != nil {
			return fmt.Errorf("write the digest to %s: %w", s.digestFile, err)
		}
	}
	return nil
}

// writeArchive writes img under every ref to path in the given format; an
// OCI archive's entries are dated mtime.
func writeArchive(path string, img v1.Image, refs []name.Reference, format string, mtime time.Time) error {
	if format == "oci" {
		tags := make([]string, len(refs))
		for i, r := range refs {
			tags[i] = r.Name()
		}
		return writeOCIArchive(path, img, tags, mtime)
	}
	refToImage := make(map[name.Reference]v1.Image, len(refs))
	for _, r := range refs {
		refToImage[r] = img
	}
	return tarball.MultiRefWriteToFile(path, refToImage)
}
