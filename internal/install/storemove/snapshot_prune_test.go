package storemove

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestPruneSnapshotsKeepsTheNewest: only the newest snapshots of one kind
// stay; other kinds and other files are not touched.
func TestPruneSnapshotsKeepsTheNewest(t *testing.T) {
	dir := t.TempDir()
	p := Paths{StateDir: dir}
	names := []string{
		"etcd-before-undo-20261202T151117Z.db", "etcd-before-undo-20261202T151307Z.db",
		"etcd-before-undo-20261202T152001Z.db", "etcd-before-undo-20261202T153109Z.db",
		"etcd-before-undo-20261203T000000Z.db", "etcd-before-reattach-20261101T000000Z.db",
		"etcd-before-undo-20261202T151117Z.db.part", "journal.jsonl",
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := p.pruneSnapshots("etcd-before-undo", 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, names[0]), filepath.Join(dir, names[1])}
	if !reflect.DeepEqual(removed, want) {
		t.Fatalf("removed %v; want %v", removed, want)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != len(names)-2 {
		t.Fatalf("left %v", left)
	}
	if removed, _ := p.pruneSnapshots("etcd-before-undo", 3); len(removed) != 0 {
		t.Fatalf("a second prune removed %v", removed)
	}
}
