package cgroups

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, p, s string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestV2FakeTree(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "cgroup.controllers"), "cpu memory pids\n")
	fs := Detect(root)
	if !fs.V2 {
		t.Fatal("expected v2")
	}
	if !fs.HasController("memory") || fs.HasController("hugetlb") {
		t.Fatal("controllers misread")
	}
	d := filepath.Join(root, "kubepods/pod1/c1")
	write(t, filepath.Join(d, "cpu.stat"), "usage_usec 1500\nuser_usec 1000\n")
	write(t, filepath.Join(d, "memory.current"), "1000\n")
	write(t, filepath.Join(d, "memory.stat"), "anon 600\ninactive_file 300\npgfault 7\npgmajfault 1\n")
	write(t, filepath.Join(d, "pids.current"), "3\n")
	s, err := fs.Stat("/kubepods/pod1/c1")
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUUsageNanos != 1500000 || s.MemoryUsage != 1000 || s.MemoryWorkingSet != 700 || s.MemoryRSS != 600 || s.Pids != 3 || s.PageFaults != 7 {
		t.Fatalf("stats %+v", s)
	}
	// Remove only empties directories: files in a fake tree keep them (like a busy cgroup).
	for _, f := range []string{"cpu.stat", "memory.current", "memory.stat", "pids.current"} {
		os.Remove(filepath.Join(d, f))
	}
	if err := fs.Remove("/kubepods/pod1/c1", "/kubepods"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "kubepods/pod1")); !os.IsNotExist(err) {
		t.Fatalf("pod1 not removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "kubepods")); err != nil {
		t.Fatalf("stop dir removed: %v", err)
	}
}

func TestV1FakeTree(t *testing.T) {
	root := t.TempDir()
	fs := Detect(root)
	if fs.V2 {
		t.Fatal("expected v1")
	}
	os.MkdirAll(filepath.Join(root, "unified"), 0o755)
	if fs.HasController("hugetlb") {
		t.Fatal("hugetlb without a v1 hierarchy reported present")
	}
	write(t, filepath.Join(root, "cpuacct/q/c/cpuacct.usage"), "42\n")
	write(t, filepath.Join(root, "memory/q/c/memory.usage_in_bytes"), "100\n")
	write(t, filepath.Join(root, "memory/q/c/memory.stat"), "total_rss 50\ntotal_inactive_file 10\n")
	s, _ := fs.Stat("/q/c")
	if s.CPUUsageNanos != 42 || s.MemoryWorkingSet != 90 || s.MemoryRSS != 50 {
		t.Fatalf("stats %+v", s)
	}
}
