package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/mvcc"
	"github.com/quantyroot/quantykube/internal/store/replica"
)

// StartOffline makes a stopped store's data dir — one just made from a
// snapshot of the source by `quantykube store restore` — a mirror of the
// source, with the same checks as Start. Done before the store first runs,
// no lease of the snapshot can expire in between (the store would delete
// their keys and no longer hold the source's state): the data dir is opened
// with lease expiry held, and the mode it records keeps it held. The data
// dir then becomes a cluster's first member as any other (ADR 008), and
// the members added later get the mode with the state they are sent.
func StartOffline(ctx context.Context, dataDir string, r *api.StartRequest, log *slog.Logger) (*api.Status, error) {
	if _, err := os.Stat(replica.RaftDir(dataDir)); err == nil {
		return nil, fmt.Errorf("data dir %s belongs to a cluster member; run the command against the running member with --endpoints instead of --data-dir", dataDir)
	}
	if fi, err := os.Stat(dataDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("data dir %s does not exist; make it first with quantykube store restore FILE --data-dir %s", dataDir, dataDir)
	}
	st, err := mvcc.Open(dataDir, mvcc.Options{Logger: log, HoldLeases: true})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	c := New(st, Single{}, log)
	defer c.Stop()
	s, err := c.Start(ctx, r)
	if err != nil {
		return nil, errors.New(statusMessage(err))
	}
	s.Member, s.Leader, s.IsLeader, s.Replayer = "offline", "", false, nil
	return s, nil
}
