package etcdrestore

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRestoreUndoAndPrune: Undo puts a set-aside data dir back whole; a new
// aside name never reuses an existing dir's; PruneAside keeps the newest.
func TestRestoreUndoAndPrune(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	r := Restore{Member: Member{DataDir: dir}, AsideFile: filepath.Join(t.TempDir(), "aside.path")}
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "old"), []byte("x"), 0o600)
	aside, err := r.asidePath()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, aside); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "restored"), []byte("y"), 0o600)
	if err := r.Undo(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "old")); err != nil {
		t.Fatalf("after Undo the old data dir is not back: %v", err)
	}
	if err := r.Undo(); err != nil {
		t.Fatalf("Undo again: %v", err)
	}
	os.MkdirAll(aside, 0o700) // an earlier undo's, the same second
	next, err := Restore{Member: r.Member, AsideFile: r.AsideFile}.asidePath()
	if err != nil || next == aside {
		t.Fatalf("a new aside path %q (%v) reuses the existing %q", next, err, aside)
	}
	for _, n := range []string{"20260101T000000Z", "20260102T000000Z", "20260103T000000Z", "20260104T000000Z"} {
		os.MkdirAll(dir+".before-undo-"+n, 0o700)
	}
	removed, err := PruneAside(dir, 3)
	if err != nil || len(removed) != 2 || removed[0] != dir+".before-undo-20260101T000000Z" {
		t.Fatalf("PruneAside removed %v, %v; want the two oldest of five", removed, err)
	}
}
