// Package cgroups is the cgroupfs driver: it names cgroup paths, reads stats and removes
// the directories the runtime created, on cgroup v1 (including the v1/v2 hybrid) and v2.
//
// Paths handed around are hierarchy-relative ("/kubepods/pod1/abc"); a FS turns them
// into directories for one controller.
package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FS is a mounted cgroup tree.
type FS struct {
	// Root is the cgroup mount root, normally /sys/fs/cgroup.
	Root string
	// V2 is true for a unified (v2-only) tree.
	V2 bool
}

// Detect inspects root: a cgroup.controllers file at the top means unified v2.
func Detect(root string) FS {
	_, err := os.Stat(filepath.Join(root, "cgroup.controllers"))
	return FS{Root: root, V2: err == nil}
}

// v1Controllers are the hierarchies runc joins and the runtime cleans on v1.
var v1Controllers = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "blkio", "devices", "freezer", "hugetlb", "net_cls", "net_prio", "perf_event", "systemd"}

// HasController reports whether runc can apply limits of controller (e.g. "hugetlb") in
// this tree: on v2 it must be in the root's cgroup.controllers; on v1 it needs its own
// hierarchy (a v1/hybrid host whose hugetlb sits on the unified mount has none, and runc
// fails to set even a zero hugetlb limit there).
func (f FS) HasController(controller string) bool {
	if f.V2 {
		b, err := os.ReadFile(filepath.Join(f.Root, "cgroup.controllers"))
		if err != nil {
			return false
		}
		for _, c := range strings.Fields(string(b)) {
			if c == controller {
				return true
			}
		}
		return false
	}
	_, err := os.Stat(filepath.Join(f.Root, controller))
	return err == nil
}

// hierarchies lists the mounted v1 hierarchies (and "unified", the v2 mount of a hybrid
// host, where runc also creates directories).
func (f FS) hierarchies() []string {
	ents, err := os.ReadDir(f.Root)
	if err != nil {
		return v1Controllers
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() || e.Type()&os.ModeSymlink != 0 {
			out = append(out, e.Name())
		}
	}
	return out
}

// Dir is the directory of path for controller (ignored on v2).
func (f FS) Dir(controller, path string) string {
	if f.V2 {
		return filepath.Join(f.Root, path)
	}
	return filepath.Join(f.Root, controller, path)
}

// Remove deletes path and every parent up to (not including) stop, deepest first, in every
// hierarchy; directories still holding processes or children are left and reported.
// stop is a prefix of path ("" removes up to the root's child).
func (f FS) Remove(path, stop string) error {
	var errs []error
	dirs := []string{}
	for p := filepath.Clean(path); p != "/" && p != "." && p != filepath.Clean("/"+stop); p = filepath.Dir(p) {
		dirs = append(dirs, p)
	}
	hier := []string{""}
	if !f.V2 {
		hier = f.hierarchies()
	}
	seen := map[string]bool{}
	for _, c := range hier {
		for _, d := range dirs {
			full := f.Dir(c, d)
			if c != "" {
				// cpu and cpuacct are often links to one directory.
				if r, err := filepath.EvalSymlinks(filepath.Join(f.Root, c)); err == nil {
					full = filepath.Join(r, d)
				}
			}
			if seen[full] {
				continue
			}
			seen[full] = true
			if err := os.Remove(full); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", full, err))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// Stats is the usage of one cgroup.
type Stats struct {
	CPUUsageNanos    uint64
	MemoryUsage      uint64
	MemoryWorkingSet uint64
	MemoryRSS        uint64
	PageFaults       uint64
	MajorPageFaults  uint64
	Pids             uint64
}

// Stat reads the usage of path. Missing files read as zero (the cgroup may be gone).
func (f FS) Stat(path string) (Stats, error) {
	var s Stats
	if f.V2 {
		cpu := keyed(f.Dir("", path), "cpu.stat")
		s.CPUUsageNanos = cpu["usage_usec"] * 1000
		s.MemoryUsage = single(f.Dir("", path), "memory.current")
		ms := keyed(f.Dir("", path), "memory.stat")
		s.MemoryRSS = ms["anon"]
		s.PageFaults, s.MajorPageFaults = ms["pgfault"], ms["pgmajfault"]
		s.MemoryWorkingSet = sub(s.MemoryUsage, ms["inactive_file"])
		s.Pids = single(f.Dir("", path), "pids.current")
		return s, nil
	}
	s.CPUUsageNanos = single(f.Dir("cpuacct", path), "cpuacct.usage")
	mem := f.Dir("memory", path)
	s.MemoryUsage = single(mem, "memory.usage_in_bytes")
	ms := keyed(mem, "memory.stat")
	s.MemoryRSS = ms["total_rss"]
	s.PageFaults, s.MajorPageFaults = ms["total_pgfault"], ms["total_pgmajfault"]
	s.MemoryWorkingSet = sub(s.MemoryUsage, ms["total_inactive_file"])
	s.Pids = single(f.Dir("pids", path), "pids.current")
	return s, nil
}

func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

func single(dir, file string) uint64 {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n
}

func keyed(dir, file string) map[string]uint64 {
	out := map[string]uint64{}
	fh, err := os.Open(filepath.Join(dir, file))
	if err != nil {
		return out
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		out[k] = n
	}
	return out
}
