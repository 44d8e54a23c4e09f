package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestPutLoadDeleteAndNames(t *testing.T) {
	dir := t.TempDir()
	s, err := New[*Sandbox](dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve("pod_ns_uid_0", "aaa111"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve("pod_ns_uid_0", "bbb222"); !errors.Is(err, ErrNameInUse) {
		t.Fatalf("second reserve: %v", err)
	}
	sb := &Sandbox{ID: "aaa111", Name: "pod_ns_uid_0", CreatedAt: time.Unix(1, 0), Ready: true}
	sb.SetConfig(&runtimeapi.PodSandboxConfig{Hostname: "h1"})
	if err := s.Put(sb); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "orphan"), 0o755)

	// A new store (a restarted runtime) sees the record and the orphan.
	s2, _ := New[*Sandbox](dir)
	orph, err := s2.Load(DecodeSandbox)
	if err != nil {
		t.Fatal(err)
	}
	if len(orph) != 1 || orph[0] != "orphan" {
		t.Fatalf("orphans %v", orph)
	}
	got, err := s2.Resolve("aaa")
	if err != nil || got.Config().GetHostname() != "h1" || !got.Ready {
		t.Fatalf("resolve: %+v %v", got, err)
	}
	if err := s2.Reserve("pod_ns_uid_0", "ccc"); !errors.Is(err, ErrNameInUse) {
		t.Fatalf("name not recovered: %v", err)
	}
	if err := s2.Delete("aaa111"); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Get("aaa111"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if err := s2.Reserve("pod_ns_uid_0", "ccc"); err != nil {
		t.Fatalf("name not released: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "aaa111")); !os.IsNotExist(err) {
		t.Fatal("record dir left behind")
	}
}

func TestResolveAmbiguousPrefix(t *testing.T) {
	s, _ := New[*Container](t.TempDir())
	s.Put(&Container{ID: "ab1", Name: "a"})
	s.Put(&Container{ID: "ab2", Name: "b"})
	if _, err := s.Resolve("ab"); err == nil {
		t.Fatal("ambiguous prefix resolved")
	}
	if c, err := s.Resolve("ab2"); err != nil || c.Name != "b" {
		t.Fatal(err)
	}
}
