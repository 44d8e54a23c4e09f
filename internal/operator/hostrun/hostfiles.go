package hostrun

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
func (r *Runner) installSelf() (string, error) {
	data, err := os.ReadFile(r.Self)
	if err != nil {
		return "", fmt.Errorf("read own binary %s: %w", r.Self, err)
	}
	sum := sha256.Sum256(data)
	hostBin := filepath.Join(BinaryDir, "quantykube-"+hex.EncodeToString(sum[:6]))
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
