package main

import (
	"archive/tar"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPushKeepsTheDigest: an OCI archive pushed to a running registry (the
// e2e's release image) is served under its tags' mirror paths and by its
// manifest digest, the one a release's quantykube.yaml pins.
func TestPushKeepsTheDigest(t *testing.T) {
	dir := t.TempDir()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"ghcr.io/quantyroot/quantykube:v0.1.0", "ghcr.io/quantyroot/quantykube:v0.1.0-0123456789ab"} {
		if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
			t.Fatal(err)
		}
	}
	archive := filepath.Join(dir, "quantykube.oci.tar")
	tarTree(t, filepath.Join(dir, "layout"), archive)

	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	n, err := pushAll(host, []string{archive})
	if err != nil || n != 2 {
		t.Fatalf("pushAll = %d, %v; want 2 tags pushed", n, err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{host + "/quantyroot/quantykube@" + want.String(), host + "/quantyroot/quantykube:v0.1.0-0123456789ab"} {
		r, err := name.ParseReference(ref, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Get(r)
		if err != nil {
			t.Fatalf("get %s: %v", ref, err)
		}
		if desc.Digest != want {
			t.Errorf("%s is %s, want %s", ref, desc.Digest, want)
		}
	}
}

// tarTree writes the files below dir into a tar at out.
func tarTree(t *testing.T, dir, out string) {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}
