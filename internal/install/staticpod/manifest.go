// Package staticpod reads and changes kubelet static pod manifests the way
// kubeadm lays them out, byte-preservingly: a change rewrites one flag's
// line and nothing else, and every write is atomic (written beside, then
// renamed), because kubelet may read a half-written file otherwise.
package staticpod

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// Flag returns the value of "- --name=value" in a container command list.
func Flag(manifest []byte, name string) (string, bool) {
	m := flagRE(name).FindSubmatch(manifest)
	if m == nil {
		return "", false
	}
	return string(m[2]), true
}

// SetFlag returns manifest with flag name set to value; exactly one
// occurrence must exist.
func SetFlag(manifest []byte, name, value string) ([]byte, error) {
	re := flagRE(name)
	if n := len(re.FindAllIndex(manifest, -1)); n != 1 {
		return nil, fmt.Errorf("manifest has %d --%s flags, want exactly 1", n, name)
	}
	return re.ReplaceAllFunc(manifest, func(line []byte) []byte {
		m := re.FindSubmatch(line)
		return append(append(append([]byte(nil), m[1]...), value...), m[3]...)
	}), nil
}

func flagRE(name string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^(\s*-\s*"?--` + regexp.QuoteMeta(name) + `=)([^"\n]*)("?\s*)$`)
}

// WriteAtomic writes data to path through a temporary file in the same
// directory, fsynced, then renamed over path.
func WriteAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	if _, err := f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, mode)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Equal reports whether the file at path holds exactly data.
func Equal(path string, data []byte) bool {
	b, err := os.ReadFile(path)
	return err == nil && bytes.Equal(b, data)
}
