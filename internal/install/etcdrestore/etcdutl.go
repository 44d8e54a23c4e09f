package etcdrestore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/quantyroot/quantykube/internal/install/staticpod"
)

// CheckEtcdutl refuses an etcdutl that is missing, or of another etcd
// minor version than the cluster's etcd (the image tag of etcdManifest,
// kubeadm's etcd static pod manifest; nil or a tag that is not a version:
// not compared): a snapshot restored by another minor version's etcdutl
// may not open in the cluster's etcd.
func CheckEtcdutl(ctx context.Context, etcdutl string, etcdManifest []byte) error {
	if _, err := exec.LookPath(etcdutl); err != nil {
		return fmt.Errorf("etcdutl not found at %s (%v): copy etcd's etcdutl, of the cluster's etcd version, there or pass --etcdutl (the operator's image carries one)", etcdutl, err)
	}
	cluster, ok := ImageMinor(etcdManifest)
	if !ok {
		return nil
	}
	out, err := exec.CommandContext(ctx, etcdutl, "version").Output()
	if err != nil {
		return fmt.Errorf("%s version: %w", etcdutl, err)
	}
	have, ok := etcdutlMinor(out)
	if ok && have != cluster {
		return fmt.Errorf("%s is etcd %s's etcdutl, the cluster runs etcd %s: pass --etcdutl with etcd %s's etcdutl", etcdutl, have, cluster, cluster)
	}
	return nil
}

var (
	imageTagRE = regexp.MustCompile(`(?m)^[\s-]*image:\s*"?[^"\s]*:v?(\d+\.\d+)\.\d+`)
	etcdutlRE  = regexp.MustCompile(`etcdutl version:\s*v?(\d+\.\d+)\.\d+`)
)

// ImageMinor is MAJOR.MINOR of the etcd image a static pod manifest runs
// (registry.k8s.io/etcd:3.6.5-0 → 3.6).
func ImageMinor(manifest []byte) (string, bool) {
	m := imageTagRE.FindSubmatch(manifest)
	if m == nil {
		return "", false
	}
	return string(m[1]), true
}

// etcdutlMinor is MAJOR.MINOR of `etcdutl version`'s output.
func etcdutlMinor(out []byte) (string, bool) {
	m := etcdutlRE.FindSubmatch(out)
	if m == nil {
		return "", false
	}
	return string(m[1]), true
}

// SnapshotRevision is the revision of an etcd-format snapshot file, as
// `etcdutl snapshot status` reads it.
func SnapshotRevision(ctx context.Context, etcdutl, path string) (int64, error) {
	out, err := exec.CommandContext(ctx, etcdutl, "snapshot", "status", path, "-w", "json").Output()
	if err != nil {
		return 0, fmt.Errorf("etcdutl snapshot status %s: %w", path, err)
	}
	var st struct {
		Revision int64 `json:"revision"`
	}
	if err := json.Unmarshal(out, &st); err != nil || st.Revision == 0 {
		return 0, fmt.Errorf("etcdutl snapshot status %s printed %q (%v)", path, out, err)
	}
	return st.Revision, nil
}

// ImageEtcdutl is where etcd's container image (registry.k8s.io/etcd, and
// the test harness's) carries etcdutl.
const ImageEtcdutl = "/usr/local/bin/etcdutl"

// ErrNoEtcdProcess means no running etcd serves the data dir asked for.
var ErrNoEtcdProcess = errors.New("no running etcd process serves that data dir")

// RunningEtcdutl finds the etcdutl of the etcd that runs with --data-dir
// dataDir, through that process's root file system under procRoot
// (/proc/<pid>/root/usr/local/bin/etcdutl): kubeadm runs etcd from its
// image, which ships etcdutl of the very same version, while the host
// usually has none. It returns ErrNoEtcdProcess when no such process runs.
func RunningEtcdutl(procRoot, dataDir string) (string, error) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", procRoot, err)
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "cmdline"))
		if err != nil || !isEtcdServing(cmd, dataDir) {
			continue
		}
		p := filepath.Join(procRoot, e.Name(), "root", ImageEtcdutl)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("etcd (pid %s) runs from an image without %s: %w", e.Name(), ImageEtcdutl, err)
		}
		return p, nil
	}
	return "", ErrNoEtcdProcess
}

// isEtcdServing reports whether a NUL-separated command line is etcd's
// (its program's base name) with --data-dir dataDir.
func isEtcdServing(cmdline []byte, dataDir string) bool {
	args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
	if len(args) == 0 || filepath.Base(string(args[0])) != "etcd" {
		return false
	}
	for i, a := range args[1:] {
		s := string(a)
		if s == "--data-dir="+dataDir || s == "-data-dir="+dataDir {
			return true
		}
		if (s == "--data-dir" || s == "-data-dir") && i+2 < len(args) && string(args[i+2]) == dataDir {
			return true
		}
	}
	return false
}

// CopyBinary copies the executable src to dst (atomically), so it stays
// usable when src's process goes away.
func CopyBinary(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	return staticpod.WriteAtomic(dst, b, 0o755)
}
