package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// RestoreStats describe a restore.
type RestoreStats struct {
	// Rev and Compacted are the restored store's revisions (the file's).
	Rev, Compacted int64
	// Keys are the live keys, Changes the puts and deletes imported, Leases
	// the leases.
	Keys, Changes, Leases int64
	Duration              time.Duration
}

// minLeaseLeft is the least time a restored lease gets.
const minLeaseLeft = time.Second

// Restore makes a store data dir at dataDir from the etcd snapshot file at
// path (see Open), keeping every revision: each key's create_revision,
// mod_revision, version and lease, the history the file holds, its leases,
// and its current and compacted revision.
//
// Nothing is created unless the input is good: dataDir must be absent or an
// empty directory, and the file must pass Open's checks. The store is built
// in a temporary directory beside dataDir and renamed into place only when
// it is complete and synced, so a failure or a crash never leaves a
// half-made dataDir (a crash can leave the temporary directory,
// .<name>.restore-*, beside it).
//
// The store being built runs on a clock stopped when the restore starts:
// no lease expires while it is built, and each lease has, from that moment,
// the time the file gives it (at least a second).
func Restore(ctx context.Context, path, dataDir string, log *slog.Logger) (RestoreStats, error) {
	start := time.Now()
	if err := checkTarget(dataDir); err != nil {
		return RestoreStats{}, err
	}
	r, err := Open(path)
	if err != nil {
		return RestoreStats{}, err
	}
	defer r.Close()
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return RestoreStats{}, fmt.Errorf("--data-dir %s: %w", dataDir, err)
	}
	parent := filepath.Dir(abs)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return RestoreStats{}, fmt.Errorf("create %s: %w (check the path and its permissions)", parent, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(abs)+".restore-")
	if err != nil {
		return RestoreStats{}, fmt.Errorf("make a temporary directory in %s: %w (check its permissions and free space)", parent, err)
	}
	st, err := restoreInto(ctx, r, tmp, start, log)
	if err == nil {
		// rename(2) itself, which replaces an empty directory (os.Rename refuses to).
		err = syscall.Rename(tmp, abs)
	}
	if err == nil {
		err = syncDir(parent)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return RestoreStats{}, fmt.Errorf("restore %s into %s: %w", path, dataDir, err)
	}
	st.Duration = time.Since(start)
	return st, nil
}

// checkTarget refuses a dataDir that exists and is not an empty directory.
func checkTarget(dataDir string) error {
	if dataDir == "" {
		return errors.New("--data-dir is empty; pass the directory to create the store in")
	}
	entries, err := os.ReadDir(dataDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--data-dir %s cannot be used (%v); pass a new or empty directory", dataDir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("--data-dir %s is not empty; pass a new or empty directory (restore never overwrites data)", dataDir)
	}
	return nil
}

// restoreInto imports the file into a new store in dir and closes it.
func restoreInto(ctx context.Context, r *Reader, dir string, start time.Time, log *slog.Logger) (RestoreStats, error) {
	s, err := mvcc.Open(dir, mvcc.Options{Logger: log, Now: func() time.Time { return start }})
	if err != nil {
		return RestoreStats{}, err
	}
	defer s.Close()
	im, err := s.NewHistoryImporter()
	if err != nil {
		return RestoreStats{}, err
	}
	var st RestoreStats
	err = r.Leases(func(id, ttl int64, left time.Duration) error {
		st.Leases++
		return im.Lease(id, ttl, max(left, minLeaseLeft))
	})
	if err != nil {
		return st, err
	}
	rev, err := r.Changes(ctx, func(typ mvccpb.Event_EventType, kv *mvccpb.KeyValue, sub int64) error {
		st.Changes++
		return im.Change(typ, kv, sub)
	})
	if err != nil {
		return st, err
	}
	if err := im.FinishAt(rev, r.Compacted); err != nil {
		return st, err
	}
	resp, err := s.Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, CountOnly: true})
	if err != nil {
		return st, err
	}
	st.Rev, st.Compacted, st.Keys = s.Rev(), s.CompactedRev(), resp.Count
	return st, s.Close()
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
