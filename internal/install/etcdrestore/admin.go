package etcdrestore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/mirror/client"
)

// adminTimeout bounds one mode change through the store's mirror admin.
const adminTimeout = time.Minute

// ReplayTo asks the store (its mirror admin a) to replay every revision
// after rev onto target, which holds, or will once restored from the
// store's snapshot at rev and started, the store's state at rev. The store
// connects as soon as target answers. Idempotent.
func ReplayTo(ctx context.Context, a *client.Client, target api.Peer, rev int64) error {
	cctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	if _, err := a.ReplayTo(cctx, api.ReplayToRequest{Target: target, Revision: rev}); err != nil {
		return fmt.Errorf("replay-to: %w", err)
	}
	return nil
}

// StopReplay makes a store that replays onto etcd the sole owner again
// (nothing to do for one that does not replay).
func StopReplay(ctx context.Context, a *client.Client) error {
	cctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	if _, err := a.ReplayTo(cctx, api.ReplayToRequest{Stop: true}); err != nil {
		return fmt.Errorf("stop the replay onto etcd: %w", err)
	}
	return nil
}

// Transition runs a cut-over ("cutover": a mirror of etcd becomes the
// owner) or a cut-back ("cutback": an owner replaying onto etcd becomes its
// mirror) through the store's mirror admin a, holding writes at most hold;
// a hold the store abandoned (the replay did not level in time) is retried,
// three attempts in all. It returns the write pause, nil when the
// transition was done before.
func Transition(ctx context.Context, a *client.Client, op string, hold time.Duration, out io.Writer, log *slog.Logger) (*api.Pause, error) {
	var last error
	for attempt := 1; attempt <= 3; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, adminTimeout+hold)
		var res *api.TransitionResult
		var err error
		if op == "cutover" {
			res, err = a.Cutover(cctx, api.TransitionRequest{Timeout: hold})
		} else {
			res, err = a.Cutback(cctx, api.TransitionRequest{Timeout: hold})
		}
		cancel()
		if err == nil {
			if res.AlreadyDone {
				fmt.Fprintf(out, "  %s was done before: the store is %s\n", op, res.Mode)
				return nil, nil
			}
			if res.Pause != nil {
				fmt.Fprintf(out, "  %s at revision %d: writes held %v; the store is %s\n", op, res.Pause.Revision, res.Pause.Duration.Round(time.Millisecond), res.Mode)
			}
			return res.Pause, nil
		}
		last = err
		log.Warn("transition refused, retrying", "op", op, "attempt", attempt, "err", err)
		time.Sleep(time.Second)
	}
	return nil, fmt.Errorf("%s: %w", op, last)
}
