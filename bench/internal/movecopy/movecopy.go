// Package movecopy measures the datastore move's bulk copy: the code path
// `quantykube install store` runs to copy etcd's keyspace into the store
// (storemove.Copier.Bulk: paged reads of etcd at one revision, imported
// with mvcc.Importer), from a running etcd into a fresh store opened in
// this process.
package movecopy

import (
	"context"
	"fmt"
	"log/slog"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/internal/install/storemove"
	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// Run copies etcd's whole keyspace and its leases into a new store at dir
// with storemove.Copier.Bulk, reading pages of pageSize keys (0:
// storemove.DefaultPageSize, what the move uses), and returns what Bulk
// measured: its Duration runs from the first read of etcd to the import's
// synced Finish (index rebuilt, revision set), as the move reports it; the
// store's Open and Close are not in it.
//
// The store is opened as the move's copy step opens it: mvcc's default
// options (fsync on, default memtable and block cache) with lease expiry
// held. dir must be empty or absent (the importer refuses a written store);
// Run closes the store and leaves dir for the caller to measure or remove.
func Run(ctx context.Context, etcd *clientv3.Client, dir string, pageSize int, log *slog.Logger) (storemove.CopyStats, error) {
	if log == nil {
		log = slog.Default()
	}
	st, err := mvcc.Open(dir, mvcc.Options{Logger: log, HoldLeases: true})
	if err != nil {
		return storemove.CopyStats{}, fmt.Errorf("open the copy's store at %s: %w", dir, err)
	}
	c := &storemove.Copier{Etcd: etcd, Store: st, PageSize: pageSize, Log: log}
	stats, err := c.Bulk(ctx)
	if cerr := st.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close the copy's store at %s: %w", dir, cerr)
	}
	if err != nil {
		return stats, fmt.Errorf("bulk copy from etcd into %s (pages of %d): %w", dir, pageSize, err)
	}
	return stats, nil
}
