package storemove

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// SaveSnapshot streams a snapshot of the etcd API at endpoint into the state
// dir as NAME-<UTC time>.db: etcd's own file format with its integrity hash
// appended, as `etcdctl snapshot save` writes it (`etcdutl snapshot restore`
// reads it). Written beside and renamed once synced: a file there is whole.
func (p Paths) SaveSnapshot(ctx context.Context, endpoint, name string) (string, int64, error) {
	cli, err := p.Dial(endpoint)
	if err != nil {
		return "", 0, err
	}
	defer cli.Close()
	if err := os.MkdirAll(p.StateDir, 0o700); err != nil {
		return "", 0, fmt.Errorf("create %s: %w", p.StateDir, err)
	}
	path := filepath.Join(p.StateDir, fmt.Sprintf("%s-%s.db", name, time.Now().UTC().Format("20060102T150405Z")))
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("snapshot %s: %w", endpoint, err)
	}
	defer rc.Close()
	f, err := os.OpenFile(path+".part", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return "", 0, fmt.Errorf("create %s: %w", path, err)
	}
	n, err := io.Copy(f, rc)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path + ".part")
		return "", 0, fmt.Errorf("save the snapshot of %s to %s: %w (check the free space there)", endpoint, path, err)
	}
	if err := os.Rename(path+".part", path); err != nil {
		return "", 0, fmt.Errorf("rename %s: %w", path, err)
	}
	return path, n, nil
}
