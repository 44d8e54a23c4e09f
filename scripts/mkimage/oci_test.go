package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestBuildWritesOCIArchive: -format oci gives a tar of an OCI image layout
// whose index names the image by its full reference under the keys
// containerd and skopeo read, with its platform; and equal inputs give
// byte-equal archives (callers cache by content).
func TestBuildWritesOCIArchive(t *testing.T) {
	dir := t.TempDir()
	bin := writeTool(t, dir)
	spec := imageSpec{
		tags:       []string{"ghcr.io/quantyroot/quantykube:v0.1.0"},
		files:      [][2]string{{bin, "/usr/local/bin/quantykube"}},
		entrypoint: []string{"/usr/local/bin/quantykube"},
		workdir:    "/",
		arch:       "amd64",
		format:     "oci",
	}
	var archives [][]byte
	for _, out := range []string{filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")} {
		spec.out = out
		if err := build(spec); err != nil {
			t.Fatalf("build: %v", err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, b)
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Error("two builds of the same image differ")
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(archives[0]))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = b
	}
	if _, ok := files["oci-layout"]; !ok {
		t.Fatalf("no oci-layout in the archive; entries: %v", keys(files))
	}
	var idx struct {
		Manifests []struct {
			MediaType   string            `json:"mediaType"`
			Annotations map[string]string `json:"annotations"`
			Platform    struct {
				OS           string `json:"os"`
				Architecture string `json:"architecture"`
			} `json:"platform"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(idx.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(idx.Manifests))
	}
	m := idx.Manifests[0]
	for _, k := range []string{annotationRefName, annotationContainerdName} {
		if m.Annotations[k] != spec.tags[0] {
			t.Errorf("annotation %s = %q, want %q", k, m.Annotations[k], spec.tags[0])
		}
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type = %s, want OCI's", m.MediaType)
	}
	if m.Platform.OS != "linux" || m.Platform.Architecture != "amd64" {
		t.Errorf("platform = %s/%s, want linux/amd64", m.Platform.OS, m.Platform.Architecture)
	}
}

// TestBuildDatedAndDigest: with a created time (SOURCE_DATE_EPOCH) every
// entry of the archive and of the layer carries it, the config says it, a
// file's mode does not depend on the umask it was written under, and
// -digest-file names the manifest the archive's index names.
func TestBuildDatedAndDigest(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	created, err := sourceDateEpoch("1700000000")
	if err != nil {
		t.Fatal(err)
	}
	spec := imageSpec{
		out: filepath.Join(dir, "a.tar"), tags: []string{"ghcr.io/quantyroot/quantykube:v0.1.0", "ghcr.io/quantyroot/quantykube:v0.1.0-0123456789ab"},
		files: [][2]string{{bin, "/usr/local/bin/quantykube"}}, arch: "amd64", format: "oci",
		created: created, digestFile: filepath.Join(dir, "digest"),
	}
	if err := build(spec); err != nil {
		t.Fatalf("build: %v", err)
	}
	dg, err := os.ReadFile(spec.digestFile)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(spec.out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	eachTarEntry(t, f, func(h *tar.Header, r io.Reader) {
		if !h.ModTime.Equal(created) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mtime %v uid %d gid %d, want %v 0 0", h.Name, h.ModTime, h.Uid, h.Gid, created)
		}
		files[h.Name], _ = io.ReadAll(r)
	})
	var idx struct {
		Manifests []struct {
			Digest string `json:"digest"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(idx.Manifests) != 2 {
		t.Fatalf("index has %d manifests, want one per tag (2)", len(idx.Manifests))
	}
	for _, m := range idx.Manifests {
		if m.Digest+"\n" != string(dg) {
			t.Errorf("index names %s, -digest-file says %q", m.Digest, dg)
		}
	}
	var manifest struct {
		Config struct{ Digest string }   `json:"config"`
		Layers []struct{ Digest string } `json:"layers"`
	}
	hexOf := func(d string) string { return d[len("sha256:"):] }
	if err := json.Unmarshal(files["blobs/sha256/"+hexOf(idx.Manifests[0].Digest)], &manifest); err != nil || len(manifest.Layers) != 1 {
		t.Fatalf("manifest: %v, %d layers", err, len(manifest.Layers))
	}
	var cfg struct{ Created string }
	if err := json.Unmarshal(files["blobs/sha256/"+hexOf(manifest.Config.Digest)], &cfg); err != nil || cfg.Created != "2023-11-14T22:13:20Z" {
		t.Errorf("config created = %q (%v), want 2023-11-14T22:13:20Z", cfg.Created, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(files["blobs/sha256/"+hexOf(manifest.Layers[0].Digest)]))
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("layer's gzip header has mtime %v name %q, want neither", zr.ModTime, zr.Name)
	}
	eachTarEntry(t, zr, func(h *tar.Header, _ io.Reader) {
		if !h.ModTime.Equal(created) {
			t.Errorf("layer entry %s dated %v, want %v", h.Name, h.ModTime, created)
		}
		if h.Name == "usr/local/bin/quantykube" && h.Mode != 0o755 {
			t.Errorf("a 0700 file is %o in the layer, want 0755", h.Mode)
		}
	})
	if _, err := sourceDateEpoch("yesterday"); err == nil {
		t.Error("SOURCE_DATE_EPOCH=yesterday accepted")
	}
	spec.format, spec.out = "docker", filepath.Join(dir, "d.tar")
	if err := build(spec); err == nil {
		t.Error("-digest-file accepted with a docker-archive")
	}
}

func TestBuildRefusesUnknownFormat(t *testing.T) {
	err := build(imageSpec{out: filepath.Join(t.TempDir(), "x.tar"), tags: []string{"a.b/c:d"}, format: "zip"})
	if err == nil {
		t.Fatal("format zip accepted")
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
