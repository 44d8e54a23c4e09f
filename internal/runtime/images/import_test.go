package images

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/quantyroot/quantykube/internal/runtime/config"
)

func TestImportDockerArchive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("unpacking layers needs root (chown)")
	}
	img, err := random.Image(128, 1)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("registry.k8s.io/kube-apiserver:v1.36.3")
	p := filepath.Join(t.TempDir(), "img.tar")
	if err := tarball.WriteToFile(p, tag, img); err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.TempDir(), config.Registry{})
	if err != nil {
		t.Fatal(err)
	}
	// A second store on the same directory stands for the running runtime.
	running, _ := Open(s.Root, config.Registry{})
	got, err := s.Import(p)
	if err != nil || len(got) != 1 {
		t.Fatalf("import: %v %v", got, err)
	}
	if im, ok := running.Lookup("registry.k8s.io/kube-apiserver:v1.36.3"); !ok || im.ID != got[0].ID {
		t.Fatal("the other store does not see the imported image")
	}
	if _, err := s.Import(filepath.Join(t.TempDir(), "missing.tar")); err == nil {
		t.Fatal("missing archive imported")
	}
}
