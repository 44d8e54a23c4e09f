package snapshot

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestRestoreBadInput: every bad input gets one line naming the problem and
// the fix, and nothing is created or changed.
func TestRestoreBadInput(t *testing.T) {
	h := buildStore(t)
	good, _ := take(t, h.s)
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
	corrupt[len(corrupt)/2] ^= 0xFF
	garbage := make([]byte, 64<<10)
	for i := range garbage {
		garbage[i] = byte(i * 7)
	}
	otherBolt := filepath.Join(in, "other.db")
	db, err := bolt.Open(otherBolt, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("stuff")); return err })
	db.Close()
	nonEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(nonEmpty, "keep"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	aFile := write("a-file", []byte("not a dir"))

	cases := []struct {
		name, file, dataDir, want string
	}{
		{"missing file", filepath.Join(in, "nope.db"), "", "does not exist"},
		{"not bbolt", write("garbage.db", garbage), "", "is not an etcd snapshot file"},
		{"empty file", write("empty.db", nil), "", "is empty"},
		{"hash mismatch", write("corrupt.db", corrupt), "", "is corrupt"},
		{"truncated", write("truncated.db", data[:len(data)/2]), "", "is truncated"},
		{"truncated at a page", write("truncated-page.db", data[:len(data)/2/4096*4096]), "", "is truncated"},
		{"bbolt but not etcd", otherBolt, "", "not an etcd snapshot"},
		{"data dir not empty", good, nonEmpty, "is not empty"},
		{"data dir is a file", good, aFile, "cannot be used"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			dataDir := c.dataDir
			if dataDir == "" {
				dataDir = filepath.Join(parent, "store")
			}
			before := listing(t, filepath.Dir(dataDir))
			_, err := Restore(context.Background(), c.file, dataDir, slog.Default())
			if err == nil {
				t.Fatal("restore succeeded")
			}
			t.Logf("error: %v", err)
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, c.want) || !strings.Contains(msg, ";") {
				t.Fatalf("error %q: want one line containing %q and a fix after ';'", msg, c.want)
			}
			if after := listing(t, filepath.Dir(dataDir)); after != before {
				t.Fatalf("restore changed %s: before %q, after %q", filepath.Dir(dataDir), before, after)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(nonEmpty, "keep")); err != nil || string(b) != "mine" {
		t.Fatalf("non-empty data dir changed: %q %v", b, err)
	}
}

// listing names the entries of dir, and of its subdirectories one level down.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var names []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		names = append(names, e.Name())
		if e.IsDir() {
			sub, _ := os.ReadDir(filepath.Join(dir, e.Name()))
			for _, s := range sub {
				names = append(names, e.Name()+"/"+s.Name())
			}
		}
	}
	return strings.Join(names, ",")
}

// TestTakeCanceled: a snapshot cut short leaves nothing behind.
func TestTakeCanceled(t *testing.T) {
	h := buildStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Take(ctx, h.s, 1, slog.Default()); err == nil {
		t.Fatal("Take on a canceled context succeeded")
	}
	if left := leftovers(t, h.s); len(left) != 0 {
		t.Fatalf("Take left %q", left)
	}
}

// TestRemoveLeftovers removes what a killed snapshot left beside the data
// dir, and only that.
func TestRemoveLeftovers(t *testing.T) {
	parent := t.TempDir()
	dataDir := filepath.Join(parent, "st[ore]")
	keep := []string{"st[ore]", ".other.snapshot-1", ".st[ore].restore-1"}
	gone := []string{".st[ore].snapshot-123", ".st[ore].snapshot-456"}
	for _, d := range append(append([]string{}, keep...), gone...) {
		if err := os.MkdirAll(filepath.Join(parent, d, "sort"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveLeftovers(dataDir)
	if err != nil || len(removed) != len(gone) {
		t.Fatalf("removed %q (%v), want %q", removed, err, gone)
	}
	if got, want := listing(t, parent), strings.Join([]string{".other.snapshot-1", ".other.snapshot-1/sort", ".st[ore].restore-1", ".st[ore].restore-1/sort", "st[ore]", "st[ore]/sort"}, ","); got != want {
		t.Fatalf("left %q, want %q", got, want)
	}
}

// TestRestoreIntoEmptyDirAndCopiedDB: an existing empty --data-dir is
// used, and a file without a hash (an etcd data dir's member/snap/db) is
// accepted after bbolt's check.
func TestRestoreIntoEmptyDirAndCopiedDB(t *testing.T) {
	h := buildStore(t)
	good, _ := take(t, h.s)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	noHash := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(noHash, data[:len(data)-HashSize], 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := Restore(context.Background(), noHash, dir, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if st.Rev != h.s.Rev() || st.Compacted != h.compacted {
		t.Fatalf("restored %+v, want revision %d compacted %d", st, h.s.Rev(), h.compacted)
	}
	if left := listing(t, filepath.Dir(dir)); strings.Contains(left, ".restore-") {
		t.Fatalf("temporary directory left: %s", left)
	}
}

// TestDamagedPagesWithoutHash: damage inside a file without a hash (a copied
// member/snap/db) never crashes the reader; what is found is one line.
func TestDamagedPagesWithoutHash(t *testing.T) {
	h := buildStore(t)
	good, _ := take(t, h.s)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	data = data[:len(data)-HashSize]
	const page = 4096
	var failed, passed int
	for off := 2 * page; off < len(data); off += 7 * page {
		bad := append([]byte(nil), data...)
		for i := off; i < off+64 && i < len(bad); i++ {
			bad[i] ^= 0xA5
		}
		path := filepath.Join(t.TempDir(), "db")
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Restore(context.Background(), path, filepath.Join(t.TempDir(), "store"), slog.Default())
		if err == nil {
			passed++ // the damage hit bytes nothing reads (free pages, slack)
			continue
		}
		failed++
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("damage at %d: error is not one line: %q", off, err)
		}
	}
	t.Logf("damaged pages: %d restores failed cleanly, %d read nothing damaged", failed, passed)
	if failed == 0 {
		t.Fatal("no damage was found")
	}
}
