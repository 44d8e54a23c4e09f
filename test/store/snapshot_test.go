package storee2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The snapshot tests run etcd 3.6.16 and the store side by side whatever
// QK_STORE_CMD says: each source (store, etcd) is snapshotted with
// `etcdctl snapshot save` and restored both ways.
var snapshotSources = []string{"store", "etcd"}

// TestSnapshotToEtcd: a snapshot of the store (and, as the reference, of
// etcd) passes `etcdutl snapshot status` and `etcdutl snapshot restore`, and
// etcd 3.6.16 started on the restored dir answers as the source did.
func TestSnapshotToEtcd(t *testing.T) {
	for _, from := range snapshotSources {
		t.Run("from-"+from, func(t *testing.T) {
			src := startServer(t, serverOptions{Kind: from, NoFsync: true})
			c := src.Client()
			h := populate(t, c, 3000)
			live, _ := getAll(t, c, 0)
			c.Close()
			file := snapshotSave(t, src)

			st := snapshotStatus(t, file)
			t.Logf("etcdutl snapshot status: %+v", st)
			if st.Revision != h.Rev || st.TotalKey != len(live) || st.Version != "3.6.0" {
				t.Fatalf("etcdutl snapshot status: revision %d, %d keys, version %q; want revision %d, %d keys, version 3.6.0",
					st.Revision, st.TotalKey, st.Version, h.Rev, len(live))
			}
			dir := filepath.Join(t.TempDir(), "restored")
			peer := "http://" + freeAddr(t)
			r := runCmd("", etcdutlBin(t), nil, "snapshot", "restore", file, "--data-dir", dir,
				"--name", "qk-restored", "--initial-cluster", "qk-restored="+peer, "--initial-advertise-peer-urls", peer)
			if r.Err != nil {
				t.Fatalf("etcdutl snapshot restore (hash checked):\n%s", r)
			}
			dst := startServer(t, serverOptions{Kind: "etcd", DataDir: dir, Name: "qk-restored", PeerURL: peer, NoFsync: true})
			verifyRestored(t, dst, src, h)
		})
	}
}

// TestSnapshotToStore: `quantykube store restore` makes a store data dir
// from a snapshot of etcd 3.6.16 and from one of the store (a round trip),
// and the store started on it answers as the source did.
func TestSnapshotToStore(t *testing.T) {
	for _, from := range snapshotSources {
		t.Run("from-"+from, func(t *testing.T) {
			src := startServer(t, serverOptions{Kind: from, NoFsync: true})
			c := src.Client()
			h := populate(t, c, 3000)
			c.Close()
			file := snapshotSave(t, src)
			dir := filepath.Join(t.TempDir(), "restored")
			r := runCmd("", serverBin(t, "store"), nil, "store", "restore", file, "--data-dir", dir)
			if r.Err != nil {
				t.Fatalf("quantykube store restore:\n%s", r)
			}
			t.Logf("quantykube store restore: %s", strings.TrimSpace(r.Stdout))
			dst := startServer(t, serverOptions{Kind: "store", DataDir: dir, NoFsync: true})
			verifyRestored(t, dst, src, h)
		})
	}
}

// TestSnapshotRestoreBadInput: `quantykube store restore` refuses a missing,
// foreign, corrupt or truncated file and a non-empty --data-dir with one
// line naming the problem and the fix, a non-zero exit, and nothing created.
func TestSnapshotRestoreBadInput(t *testing.T) {
	bin := serverBin(t, "store")
	src := startServer(t, serverOptions{NoFsync: true})
	c := src.Client()
	populate(t, c, 200)
	c.Close()
	good := snapshotSave(t, src)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	in := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(in, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	corrupt := append([]byte(nil), data...)
	corrupt[len(corrupt)/3] ^= 0x01
	nonEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(nonEmpty, "mine"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{filepath.Join(in, "nope.db")}, "does not exist"},
		{"not a snapshot", []string{write("notes.txt", []byte(strings.Repeat("not bbolt\n", 1000)))}, "is not an etcd snapshot file"},
		{"corrupt", []string{write("corrupt.db", corrupt)}, "is corrupt"},
		{"truncated", []string{write("truncated.db", data[:len(data)/2])}, "is truncated"},
		{"data dir not empty", []string{good, "--data-dir", nonEmpty}, "is not empty"},
		{"no data dir", []string{good, "--data-dir", ""}, "--data-dir is empty"},
		{"no file", nil, "takes one argument"},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			args := append([]string{"store", "restore"}, c.args...)
			if !strings.Contains(strings.Join(c.args, " "), "--data-dir") {
				args = append(args, "--data-dir", filepath.Join(parent, "store"))
			}
			before := dirListing(t, parent) + "|" + dirListing(t, nonEmpty)
			r := runCmd("", bin, nil, args...)
			if r.Err == nil || !isExit(r.Err) {
				t.Fatalf("quantykube %s: want a non-zero exit:\n%s", strings.Join(args, " "), r)
			}
			msg := strings.TrimSuffix(r.Stderr, "\n")
			t.Logf("%s", msg)
			if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "quantykube: ") || !strings.Contains(msg, c.want) || !strings.Contains(msg, ";") {
				t.Fatalf("want one line \"quantykube: ...%s...; <fix>\" on stderr, got %q", c.want, r.Stderr)
			}
			if after := dirListing(t, parent) + "|" + dirListing(t, nonEmpty); after != before {
				t.Fatalf("restore changed the disk: before %q, after %q", before, after)
			}
		})
	}
}

// dirListing names what dir holds.
func dirListing(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, ",")
}
