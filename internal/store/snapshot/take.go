package snapshot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// Stats describe a snapshot.
type Stats struct {
	// Rev and Compacted are the revisions the snapshot holds.
	Rev, Compacted int64
	// Base is the number of keys live at the compacted revision, Changes the
	// puts and deletes after it, Leases the leases.
	Base, Changes, Leases int64
	// Build is how long writing the file took.
	Build time.Duration
}

// File is a snapshot of the store in etcd's format, in a private temporary
// directory, ready to be streamed. Close removes it.
type File struct {
	Stats
	w   *Writer
	dir string
}

// Take writes a snapshot of st into a new temporary directory beside its
// data dir (on the same disk, never in memory): .<data dir name>.snapshot-*.
// It reads one consistent view of the store (mvcc.Export): writers go on
// while it runs and the snapshot holds exactly the view's revision. The
// view is released before Take returns; streaming reads only the file.
// memberID is recorded as the one voter of the raft configuration. On error
// or cancellation nothing is left behind.
func Take(ctx context.Context, st *mvcc.Store, memberID uint64, log *slog.Logger) (*File, error) {
	start := time.Now()
	dir, prefix := tempPlace(st.Dir())
	tmp, err := os.MkdirTemp(dir, prefix)
	if err != nil {
		return nil, fmt.Errorf("snapshot: make a temporary directory in %s: %w", dir, err)
	}
	f := &File{dir: tmp}
	if err := f.build(ctx, st, memberID, log); err != nil {
		f.Close()
		return nil, err
	}
	f.Build = time.Since(start)
	return f, nil
}

// tempPlace is where the snapshots of the store in dataDir are built: the
// directory beside it, and the prefix of their temporary directories.
func tempPlace(dataDir string) (dir, prefix string) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = filepath.Clean(dataDir)
	}
	return filepath.Dir(abs), "." + filepath.Base(abs) + ".snapshot-"
}

// RemoveLeftovers removes the temporary directories of snapshots of the
// store in dataDir that a killed process left beside it, and returns them.
// Call it only while holding the store open: no other process then builds
// a snapshot of it.
func RemoveLeftovers(dataDir string) ([]string, error) {
	dir, prefix := tempPlace(dataDir)
	found, err := filepath.Glob(filepath.Join(dir, globEscape(prefix)+"*"))
	if err != nil {
		return nil, err
	}
	for _, d := range found {
		if err := os.RemoveAll(d); err != nil {
			return nil, fmt.Errorf("remove snapshot leftover %s: %w", d, err)
		}
	}
	return found, nil
}

// globEscape quotes the pattern characters of a file name.
func globEscape(name string) string {
	var b strings.Builder
	for _, r := range name {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (f *File) build(ctx context.Context, st *mvcc.Store, memberID uint64, log *slog.Logger) error {
	exp, err := st.Export()
	if err != nil {
		return fmt.Errorf("snapshot: open a view of the store: %w", err)
	}
	defer exp.Close()
	f.Rev, f.Compacted = exp.Rev, exp.Compacted
	if f.w, err = NewWriter(filepath.Join(f.dir, "db")); err != nil {
		return err
	}
	w := f.w
	if err := exp.Leases(func(l mvcc.Lease) error { return w.Lease(l.ID, l.GrantedTTL, l.Remaining) }); err != nil {
		return fmt.Errorf("snapshot: leases: %w", err)
	}
	if err := f.writeBase(ctx, exp, log); err != nil {
		return fmt.Errorf("snapshot: keys at the compacted revision %d: %w", exp.Compacted, err)
	}
	_, err = exp.Changes(ctx, func(c mvcc.Change) error {
		if c.Type == mvccpb.DELETE {
			return w.Delete(c.KV.Key, c.KV.ModRevision, c.Sub)
		}
		return w.Put(c.KV, c.Sub)
	})
	if err != nil {
		return fmt.Errorf("snapshot: changes after revision %d: %w", exp.Compacted, err)
	}
	f.Leases, f.Changes = w.leases, w.changes-f.Base
	return w.Finish(Meta{Rev: exp.Rev, Compacted: exp.Compacted, MemberID: memberID})
}

// writeBase writes the keys live at the compacted revision, sorted by
// revision through a temporary sort space beside the file.
func (f *File) writeBase(ctx context.Context, exp *mvcc.Export, log *slog.Logger) error {
	if exp.Compacted <= 0 {
		return nil
	}
	dir := filepath.Join(f.dir, "sort")
	s, err := newBaseSorter(dir, log)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	defer s.close()
	if err := exp.Base(ctx, s.add); err != nil {
		return err
	}
	f.Base = s.n
	return s.each(ctx, func(main, sub int64, value []byte) error {
		return f.w.add(main, sub, false, append([]byte(nil), value...)) // bbolt keeps it until commit
	})
}

// Size is the number of bytes WriteTo writes.
func (f *File) Size() (int64, error) { return f.w.Size() }

// WriteTo writes the snapshot (without the hash trailer).
func (f *File) WriteTo(w io.Writer) (int64, error) { return f.w.WriteTo(w) }

// Close removes the snapshot and its directory.
func (f *File) Close() error {
	var err error
	if f.w != nil {
		err = f.w.Close()
		f.w = nil
	}
	if rmErr := os.RemoveAll(f.dir); rmErr != nil && err == nil {
		err = fmt.Errorf("snapshot: remove %s: %w", f.dir, rmErr)
	}
	return err
}
