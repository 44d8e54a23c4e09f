package netns

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCreateRemove(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	p := filepath.Join(t.TempDir(), "ns", "pod1")
	if err := Create(p); err != nil {
		t.Fatal(err)
	}
	var st, self unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	unix.Stat("/proc/self/ns/net", &self)
	if st.Ino == self.Ino {
		t.Fatal("pinned namespace is the host's")
	}
	if err := Create(p); err == nil {
		t.Fatal("second create at the same path succeeded")
	}
	if err := Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatal("netns file left behind")
	}
	if err := Remove(p); err != nil {
		t.Fatalf("second remove: %v", err)
	}
}
