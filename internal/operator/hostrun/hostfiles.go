package hostrun

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// measurement is the last "downtime" line of the run's output, if any.
func (r *Runner) measurement() string {
	f, err := os.Open(r.hostPath(r.Output()))
	if err != nil {
		return ""
	}
	defer f.Close()
	var last string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "downtime") {
			last = strings.TrimSpace(sc.Text())
		}
	}
	return last
}

// installSelf copies this binary to BinaryDir on the host under a name keyed
// by its content (written beside, then renamed) and returns its host path.
func (r *Runner) installSelf() (string, error) { return r.installBinary(r.Self, "quantykube") }

// installBinary copies src (a path in this container) to BinaryDir on the
// host as NAME-<content hash> (written beside, then renamed: a host path
// that exists is whole) and returns its host path.
func (r *Runner) installBinary(src, name string) (string, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", src, err)
	}
	sum := sha256.Sum256(data)
	hostBin := filepath.Join(BinaryDir, name+"-"+hex.EncodeToString(sum[:6]))
	dst := r.hostPath(hostBin)
	if _, err := os.Stat(dst); err == nil {
		return hostBin, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", fmt.Errorf("create %s on the host: %w", BinaryDir, err)
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, 0o755); err != nil {
		return "", fmt.Errorf("write %s on the host: %w", hostBin, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", fmt.Errorf("rename %s on the host: %w", hostBin, err)
	}
	return hostBin, nil
}

// ImageEtcdutl is where the release image carries etcd's etcdutl (of the
// etcd version kubeadm's clusters run; scripts/image.sh).
const ImageEtcdutl = "/usr/local/bin/etcdutl"

// etcdutlArgs are the flags that give the HA undo's host steps etcd's
// etcdutl: a kubeadm node has etcd only inside its static pod's image, and
// replay-to and restore-etcd read and restore etcd's snapshot format with
// it. The image's copy is put on the host beside this binary; without one
// (a development binary run by hand) the host command's default stands.
func (r *Runner) etcdutlArgs() ([]string, error) {
	if r.HA == "" || r.Op != v1.OperationUndo || r.Etcdutl == "" {
		return nil, nil
	}
	if _, err := os.Stat(r.Etcdutl); err != nil {
		return nil, nil
	}
	bin, err := r.installBinary(r.Etcdutl, "etcdutl")
	if err != nil {
		return nil, err
	}
	return []string{"--etcdutl=" + bin}, nil
}
