package storemove

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// manifestFor is a kube-apiserver manifest naming etcdServers, tagged by image.
func manifestFor(etcdServers, image string) []byte {
	return []byte("spec:\n  containers:\n  - command:\n    - kube-apiserver\n    - --etcd-servers=" + etcdServers + "\n    image: " + image + "\n")
}

// TestRestoreEtcdManifestLeavesAManifestNeverMovedOut: a run killed at the
// start of stop-apiserver is put back without touching the manifest in
// place, whether no manifest was ever saved (a first move) or the saved one
// is an earlier move's, older than kubeadm's manifest now (it would put an
// old API server back). A manifest naming the store needs the saved one.
func TestRestoreEtcdManifestLeavesAManifestNeverMovedOut(t *testing.T) {
	const etcd = "https://127.0.0.1:2379"
	for _, tc := range []struct {
		name         string
		live, saved  []byte
		wantErr      string
		wantLiveSame bool
	}{
		{name: "first move, nothing saved", live: manifestFor(etcd, "kube-apiserver:v1.36.3"), wantLiveSame: true},
		{name: "an earlier move's saved manifest", live: manifestFor(etcd, "kube-apiserver:v1.36.3"), saved: manifestFor(etcd, "kube-apiserver:v1.35.0"), wantLiveSame: true},
		{name: "switched, nothing saved", live: manifestFor(StoreURL, "kube-apiserver:v1.36.3"), wantErr: "read the saved manifest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			m := &Mover{Paths: Paths{Manifests: filepath.Join(root, "manifests"), StateDir: filepath.Join(root, "state")}}
			for _, d := range []string{m.Paths.Manifests, m.Paths.StateDir} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(m.Paths.APIServerManifest(), tc.live, 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.saved != nil {
				if err := os.WriteFile(m.Paths.savedManifest(), tc.saved, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := m.restoreEtcdManifest(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(m.Paths.APIServerManifest())
			if tc.wantLiveSame && string(got) != string(tc.live) {
				t.Fatalf("the manifest in place was changed to:\n%s", got)
			}
		})
	}
}
