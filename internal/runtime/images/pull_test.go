package images

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/quantyroot/quantykube/internal/runtime/config"
)

// mirrorStore starts an in-memory registry holding "<repo>:<tag>" images and a store
// whose mirror for upstream host "example.invalid" points at it (no upstream fallback).
func mirrorStore(t *testing.T, refs ...string) (*Store, string) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, r := range refs {
		img, err := random.Image(256, 2)
		if err != nil {
			t.Fatal(err)
		}
		ref, _ := name.ParseReference(host+"/"+r, name.Insecure)
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
	}
	c := config.Config{Mirrors: map[string]config.Mirror{"example.invalid": {Endpoints: []string{srv.URL}, SkipUpstream: true}}}
	reg, err := c.Registries()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.TempDir(), reg)
	if err != nil {
		t.Fatal(err)
	}
	return s, host
}

func TestPullThroughMirrorKeepsUpstreamName(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("unpacking layers needs root (chown)")
	}
	s, _ := mirrorStore(t, "team/app:v1")
	im, err := s.Pull(context.Background(), "example.invalid/team/app:v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(im.RepoTags) != 1 || im.RepoTags[0] != "example.invalid/team/app:v1" {
		t.Fatalf("tags %v", im.RepoTags)
	}
	if len(im.RepoDigests) != 1 || !strings.HasPrefix(im.RepoDigests[0], "example.invalid/team/app@sha256:") {
		t.Fatalf("digests %v", im.RepoDigests)
	}
	for _, ref := range []string{im.ID, im.ID[7:19], "example.invalid/team/app:v1", im.RepoDigests[0]} {
		if got, ok := s.Lookup(ref); !ok || got.ID != im.ID {
			t.Errorf("lookup %q failed", ref)
		}
	}
	if len(im.Layers) != 2 {
		t.Fatalf("layers %v", im.Layers)
	}
	for _, l := range im.Layers {
		if _, err := os.Stat(s.LayerDir(l)); err != nil {
			t.Fatalf("layer %s not unpacked: %v", l, err)
		}
	}
	// A reopened store (restart) still knows the image.
	s2, err := Open(s.Root, s.Registry)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s2.Lookup("example.invalid/team/app:v1"); !ok {
		t.Fatal("image lost on reopen")
	}
	if u, err := s2.FsUsage(); err != nil || u.Bytes == 0 || u.Inodes == 0 {
		t.Fatalf("usage %+v %v", u, err)
	}
	// Removal drops the image and (once past the grace period) its layers.
	for _, l := range im.Layers {
		old := time.Now().Add(-2 * gcGrace)
		os.Chtimes(filepath.Dir(s.LayerDir(l)), old, old)
	}
	if err := s2.Remove("example.invalid/team/app:v1", nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := s2.Lookup(im.ID); ok {
		t.Fatal("image still present")
	}
	if _, err := os.Stat(s.LayerDir(im.Layers[0])); !os.IsNotExist(err) {
		t.Fatal("layer left behind")
	}
}

func TestPullMissingImageIsNotFound(t *testing.T) {
	s, _ := mirrorStore(t)
	_, err := s.Pull(context.Background(), "example.invalid/none:v1", nil)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

func TestRemoveKeepsLayersInUse(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("unpacking layers needs root (chown)")
	}
	s, _ := mirrorStore(t, "a:1")
	im, err := s.Pull(context.Background(), "example.invalid/a:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(im.ID, im.Layers); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.LayerDir(im.Layers[1])); err != nil {
		t.Fatal("layer in use was removed")
	}
}
