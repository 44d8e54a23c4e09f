package main

import (
	"archive/tar"
	"bytes"
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
