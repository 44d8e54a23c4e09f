package etcdrestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/quantyroot/quantykube/internal/install/staticpod"
)

// Restore restores a stopped local etcd member's data dir from a store
// snapshot.
type Restore struct {
	// Etcdutl is etcd's etcdutl, of the cluster's etcd version.
	Etcdutl string
	// Snapshot is the store's etcd-format snapshot.
	Snapshot string
	// Member is the local member (name, data dir, peer URL, token).
	Member Member
	// InitialCluster is every member as name=peerURL.
	InitialCluster []string
	// AsideFile records where the old data dir was set aside, so that Undo,
	// in a later process, finds it.
	AsideFile string
}

// Do sets the member's data dir aside (once: a rerun finds the path in
// AsideFile and the dir already there), restores the snapshot into a
// fresh dir beside it, gives its leases time (RestoredLeaseTTLs) and moves
// it into place. The data dir is either the old one, absent, or the whole
// restored one: never a half-written restore.
func (r Restore) Do(ctx context.Context, out io.Writer) error {
	dir := r.Member.DataDir
	aside, err := r.asidePath()
	if err != nil {
		return err
	}
	if _, err := os.Stat(aside); errors.Is(err, os.ErrNotExist) {
		if err := os.Rename(dir, aside); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("set etcd's data dir aside: %w", err)
		}
	}
	tmp := dir + ".restoring"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil { // a restore cut short by a crash
		return err
	}
	res, err := exec.CommandContext(ctx, r.Etcdutl, "snapshot", "restore", r.Snapshot, "--name", r.Member.Name,
		"--data-dir", tmp, "--initial-cluster", strings.Join(r.InitialCluster, ","), "--initial-cluster-token", r.Member.Token,
		"--initial-advertise-peer-urls", r.Member.PeerURL).CombinedOutput()
	if err != nil {
		return fmt.Errorf("etcdutl snapshot restore: %v: %s", err, strings.TrimSpace(string(res)))
	}
	leases, err := RestoredLeaseTTLs(tmp)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("move the restored data dir into place: %w", err)
	}
	fmt.Fprintf(out, "  %d leases get their full TTL, at least %d s, from etcd's first election (the snapshot had the time they had left)\n", leases, RestoredLeaseGrace)
	fmt.Fprintf(out, "  etcd member %s restored into %s (the old data dir is %s)\n", r.Member.Name, dir, aside)
	return nil
}

// asidePath is where the old data dir goes: the path AsideFile records,
// or a new one (recorded before anything moves).
func (r Restore) asidePath() (string, error) {
	b, err := os.ReadFile(r.AsideFile)
	if err == nil {
		return string(b), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	aside := fmt.Sprintf("%s.before-undo-%s", r.Member.DataDir, time.Now().UTC().Format("20060102T150405Z"))
	for i := 2; exists(aside); i++ { // never an earlier undo's: Do would take it for this one's
		aside = fmt.Sprintf("%s.before-undo-%s-%d", r.Member.DataDir, time.Now().UTC().Format("20060102T150405Z"), i)
	}
	if err := os.MkdirAll(filepath.Dir(r.AsideFile), 0o700); err != nil {
		return "", err
	}
	return aside, staticpod.WriteAtomic(r.AsideFile, []byte(aside), 0o600)
}

// Undo puts the set-aside data dir back in place of the restored one.
// Idempotent: nothing recorded, or nothing set aside, is nothing to do.
func (r Restore) Undo() error {
	aside, err := os.ReadFile(r.AsideFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(string(aside)); err != nil {
		return nil // not set aside yet, or put back already
	}
	if err := os.RemoveAll(r.Member.DataDir); err != nil {
		return err
	}
	if err := os.Rename(string(aside), r.Member.DataDir); err != nil {
		return fmt.Errorf("put etcd's data dir back: %w", err)
	}
	return os.Remove(r.AsideFile)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// PruneAside removes all but the newest keep data dirs that undos set
// aside beside dataDir (<dataDir>.before-undo-<time>; their names sort by
// time) and returns what it removed: a node moved back and forth for years
// must not fill its disk with them (each undo also saved etcd to a
// snapshot, pruned the same way).
func PruneAside(dataDir string, keep int) ([]string, error) {
	all, err := filepath.Glob(dataDir + ".before-undo-*")
	if err != nil {
		return nil, err
	}
	sort.Strings(all)
	var removed []string
	for len(all) > keep {
		if err := os.RemoveAll(all[0]); err != nil {
			return removed, fmt.Errorf("remove the old set-aside etcd data dir %s: %w", all[0], err)
		}
		removed = append(removed, all[0])
		all = all[1:]
	}
	return removed, nil
}
