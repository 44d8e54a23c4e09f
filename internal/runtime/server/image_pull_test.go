package server

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/cgroups"
	"github.com/quantyroot/quantykube/internal/runtime/config"
	"github.com/quantyroot/quantykube/internal/runtime/images"
)

// TestPullImageRegistries drives the CRI ImageService's PullImage on the real image
// store, configured from a runtime.toml, against two in-process registries: a mirror
// (anonymous) for registry.invalid, a name that never resolves, and a private
// registry that demands basic auth and has credentials in registry.auth. The request's
// Auth (what kubelet sends from image pull secrets) overrides the configured
// credentials for that registry.
func TestPullImageRegistries(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("unpacking layers needs root (chown)")
	}
	quiet := registry.Logger(log.New(io.Discard, "", 0))
	mirror := httptest.NewServer(registry.New(quiet))
	defer mirror.Close()
	privateH := registry.New(quiet)
	private := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "kubelet" || p != "pull-secret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		privateH.ServeHTTP(w, r)
	}))
	defer private.Close()
	privateAdmin := httptest.NewServer(privateH)
	defer privateAdmin.Close()
	host := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	push := func(at, repoTag string) string {
		img, _ := random.Image(128, 1)
		ref, _ := name.ParseReference(at+"/"+repoTag, name.Insecure)
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
		id, _ := img.ConfigName()
		return id.String()
	}
	mirrored := push(host(mirror), "team/app:v1")
	privateID := push(host(privateAdmin), "team/secret:v1")

	newSvc := func(auth string) *Service {
		cfg := config.Default()
		dir := t.TempDir()
		cfg.StateDir, cfg.RootDir, cfg.RuncRoot = filepath.Join(dir, "state"), filepath.Join(dir, "root"), filepath.Join(dir, "runc")
		doc := fmt.Sprintf(`[registry.hosts."registry.invalid".host."http://%s"]
capabilities = ["pull", "resolve"]
[registry.hosts.%q]
server = "http://%s"
`, host(mirror), host(private), host(private)) + auth
		if err := config.Parse([]byte(doc), &cfg); err != nil {
			t.Fatal(err)
		}
		reg, err := cfg.Registries()
		if err != nil {
			t.Fatal(err)
		}
		st, err := images.Open(filepath.Join(cfg.RootDir, "images"), reg)
		if err != nil {
			t.Fatal(err)
		}
		j := newJournal()
		s, err := newService(cfg, deps{runc: &fakeRunc{j: j}, monitors: &fakeMonitors{j: j}, net: &fakeNetwork{j: j}, fs: &fakeFS{j: j, mounts: map[string]string{}},
			images: st, cg: cgroups.FS{Root: filepath.Join(dir, "cgroup")}}, testTimeouts)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pull := func(s *Service, ref string, a *runtimeapi.AuthConfig) (string, error) {
		resp, err := s.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}, Auth: a})
		return resp.GetImageRef(), err
	}
	secret := host(private) + "/team/secret:v1"

	s := newSvc(fmt.Sprintf("[registry.auth.%q]\nusername = \"kubelet\"\npassword = \"pull-secret\"\n", host(private)))
	if id, err := pull(s, "registry.invalid/team/app:v1", nil); err != nil || id != mirrored {
		t.Fatalf("through the mirror: %s %v", id, err)
	}
	st, err := s.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "registry.invalid/team/app:v1"}})
	if err != nil || st.GetImage().GetId() != mirrored {
		t.Fatalf("status of the mirrored image under its upstream name: %v %v", st, err)
	}
	if id, err := pull(s, secret, nil); err != nil || id != privateID {
		t.Fatalf("with configured credentials: %s %v", id, err)
	}

	// Stale configured credentials: the request's win; wrong request credentials lose.
	stale := newSvc(fmt.Sprintf("[registry.auth.%q]\nusername = \"kubelet\"\npassword = \"rotated\"\n", host(private)))
	if _, err := pull(stale, secret, nil); err == nil || !strings.Contains(err.Error(), "upstream http://"+host(private)) {
		t.Fatalf("stale credentials: the error must name the endpoint: %v", err)
	}
	if id, err := pull(stale, secret, &runtimeapi.AuthConfig{Username: "kubelet", Password: "pull-secret"}); err != nil || id != privateID {
		t.Fatalf("with the request's credentials: %s %v", id, err)
	}
	_, err = pull(s, secret, &runtimeapi.AuthConfig{Username: "kubelet", Password: "wrong"})
	if err == nil || status.Code(err) == codes.NotFound {
		t.Fatalf("wrong request credentials must fail (not as not-found): %v", err)
	}
}
