package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/bench/internal/movecopy"
	"github.com/quantyroot/quantykube/bench/internal/report"
)

// runMoveCopy measures the datastore move's bulk copy out of the etcd run
// once its key space is loaded: movecopy.Run, i.e. storemove.Copier.Bulk
// from this etcd into a fresh store opened in the harness's process on dir
// (the store run's directory: the servers' filesystem; fsync on), pages of
// pageSize keys. It records the copy rate (keys/s), Bulk's duration and the
// keys copied (the whole keyspace: the key space's keys and whatever the
// earlier workloads left) in the etcd run's column. dir is removed
// afterwards unless --keep-data.
func (h *harness) runMoveCopy(ctx context.Context, c *clientv3.Client, dir string, pageSize int, add adder) error {
	if !h.keepData {
		defer os.RemoveAll(dir)
	}
	wl := moveCopyWorkload(pageSize)
	st, err := movecopy.Run(ctx, c, dir, pageSize, slog.Default().With("component", "move-copy store"))
	if err != nil {
		return err
	}
	add(wl, metricCopyRate, "keys/s", report.Higher, st.Rate())
	add(wl, "copy time", "ms", report.Lower, ms(st.Duration))
	add(wl, "keys copied", "keys", report.Neutral, float64(st.Keys))
	slog.Info("move copy", "workload", wl, "keys", st.Keys, "leases", st.Leases, "mib", int(mib(st.Bytes)),
		"took", st.Duration.Round(time.Millisecond), "keys_per_s", int(st.Rate()))
	return nil
}
