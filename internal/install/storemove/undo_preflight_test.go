package storemove

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUndoRefusesWithoutEtcdutl: with no --etcdutl and no running etcd to
// take etcdutl from, undo's preflight refuses in one line that names the
// problem and the fix; with the running etcd's image holding one, that one
// is taken.
func TestUndoRefusesWithoutEtcdutl(t *testing.T) {
	dir := t.TempDir()
	m := &Mover{Paths: Paths{Manifests: filepath.Join(dir, "manifests"), StateDir: filepath.Join(dir, "state")}}
	os.MkdirAll(m.Paths.Manifests, 0o700)
	os.WriteFile(m.Paths.etcdManifest(), []byte(`spec:
  containers:
  - command:
    - etcd
    - --advertise-client-urls=https://10.0.0.5:2379
    - --data-dir=/var/lib/etcd
    - --initial-advertise-peer-urls=https://10.0.0.5:2380
    - --name=cp1
    image: registry.k8s.io/etcd:3.6.16-0
`), 0o600)
	procRoot = filepath.Join(dir, "proc")
	defer func() { procRoot = "/proc" }()
	os.MkdirAll(filepath.Join(procRoot, "1"), 0o700)
	os.WriteFile(filepath.Join(procRoot, "1", "cmdline"), []byte("/sbin/init\x00"), 0o600)
	err := m.preflightUndo(context.Background())
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "no etcdutl") || !strings.Contains(err.Error(), "--etcdutl") {
		t.Fatalf("preflight without etcdutl: %v; want one line naming etcdutl and --etcdutl", err)
	}
	if _, err := os.Stat(m.Paths.StateDir); err == nil {
		t.Fatal("the refused preflight created the state dir")
	}
	etcd := filepath.Join(procRoot, "42")
	os.MkdirAll(filepath.Join(etcd, "root", "usr", "local", "bin"), 0o700)
	os.WriteFile(filepath.Join(etcd, "cmdline"), []byte("etcd\x00--data-dir=/var/lib/etcd\x00"), 0o600)
	os.WriteFile(filepath.Join(etcd, "root", "usr", "local", "bin", "etcdutl"), []byte("#!/bin/sh\necho 'etcdutl version: 3.5.21'\n"), 0o755)
	err = m.preflightUndo(context.Background())
	if m.etcdutlFrom != filepath.Join(etcd, "root", "usr", "local", "bin", "etcdutl") {
		t.Fatalf("the running etcd's etcdutl was not taken: %q (%v)", m.etcdutlFrom, err)
	}
	if err == nil || !strings.Contains(err.Error(), "etcd 3.5's etcdutl, the cluster runs etcd 3.6") {
		t.Fatalf("an etcdutl of another minor version: %v; want it refused", err)
	}
}
