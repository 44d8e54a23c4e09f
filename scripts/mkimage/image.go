package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
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
}

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// build writes the image described by s to s.out as a docker-archive.
func build(s imageSpec) error {
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
	if err := writeLayer(lf, s.files, s.links); err != nil {
		lf.Close()
		return fmt.Errorf("write layer %s: %w", layerPath, err)
	}
	if err := lf.Close(); err != nil {
		return fmt.Errorf("close %s: %w", layerPath, err)
	}
	layer, err := tarball.LayerFromFile(layerPath)
	if err != nil {
		return fmt.Errorf("read layer %s: %w", layerPath, err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
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
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return fmt.Errorf("set config: %w", err)
	}
	refToImage := make(map[name.Reference]v1.Image, len(refs))
	for _, r := range refs {
		refToImage[r] = img
	}
	tmp := s.out + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, refToImage); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, s.out); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}
