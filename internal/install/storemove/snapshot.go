package storemove

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
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

// keepSnapshots is how many snapshots of one kind (etcd-before-undo, ...)
// the state dir keeps: every undo saves etcd whole, and a node moved back
// and forth for years must not fill its disk with them.
const keepSnapshots = 3

// pruneSnapshots removes all but the newest keep snapshots named name-*.db
// (their names sort by time) and returns what it removed.
func (p Paths) pruneSnapshots(name string, keep int) ([]string, error) {
	all, err := filepath.Glob(filepath.Join(p.StateDir, name+"-*.db"))
	if err != nil {
		return nil, err
	}
	sort.Strings(all)
	var removed []string
	for len(all) > keep {
		if err := os.Remove(all[0]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("remove the old snapshot %s: %w", all[0], err)
		}
		removed = append(removed, all[0])
		all = all[1:]
	}
	return removed, nil
}

// saveAndPrune saves a snapshot of endpoint as name, keeps the newest
// keepSnapshots of that name, and says both.
func (p Paths) saveAndPrune(ctx context.Context, out io.Writer, endpoint, name, what string) error {
	path, size, err := p.SaveSnapshot(ctx, endpoint, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  %s saved: %s (%d MiB; restore with etcdutl snapshot restore)\n", what, path, size>>20)
	removed, err := p.pruneSnapshots(name, keepSnapshots)
	if len(removed) > 0 {
		fmt.Fprintf(out, "  older snapshots removed (the newest %d are kept): %s\n", keepSnapshots, strings.Join(removed, ", "))
	}
	return err
}
