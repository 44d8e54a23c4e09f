package mirror

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

// defaultTimeout bounds a transition's pause unless the caller says.
const defaultTimeout = 5 * time.Second

// Cutover makes a mirror the owner (see cutover). Precondition checked by
// the caller: no API server writes to the source any more.
func (c *Controller) Cutover(ctx context.Context, r *api.TransitionRequest) (*api.TransitionResult, error) {
	return c.transition(ctx, r, opCutover, api.Mirror, api.Owner)
}

// Cutback makes an owner that replays onto etcd a mirror of it (see
// cutback).
func (c *Controller) Cutback(ctx context.Context, r *api.TransitionRequest) (*api.TransitionResult, error) {
	return c.transition(ctx, r, opCutback, api.ReplayingTo, api.Mirror)
}

// transition holds writes on every member (one mode change), then waits for
// the leader to switch or abandon. A call that finds the transition done
// answers as the first did; one that finds it in progress waits for it.
func (c *Controller) transition(ctx context.Context, r *api.TransitionRequest, op string, from, to api.Mode) (*api.TransitionResult, error) {
	timeout := r.Timeout
	if timeout == 0 {
		timeout = defaultTimeout
	}
	if timeout < 100*time.Millisecond || timeout > time.Minute {
		return nil, invalid(errInvalidTimeout)
	}
	st := c.state.Load()
	switch {
	case st.rec.Hold != nil && st.rec.Hold.Op == op:
		return c.awaitTransition(ctx, st.epoch, op, to) // in progress: wait for it
	case st.rec.Hold != nil:
		return nil, refuse("a %s is in progress; wait for it and run the command again", st.rec.Hold.Op)
	case st.rec.Mode == to && st.rec.LastPause != nil && st.rec.LastPause.Op == op:
		return &api.TransitionResult{Mode: to, Pause: st.rec.LastPause, AlreadyDone: true}, nil
	case st.rec.Mode != from:
		return nil, refuse("the store is in mode %s; a %s needs mode %s", st.rec.Mode, op, from)
	case st.rec.Failed != "":
		return nil, refuse("the replay failed (%s); a %s cannot finish: roll back", st.rec.Failed, op)
	}
	if err := c.waitClose(ctx, st); err != nil {
		return nil, err
	}
	next := st.rec
	next.Hold = &api.Hold{ID: holdID(), Op: op, Timeout: timeout, Started: time.Now().UTC()}
	err := c.st.ChangeMode(ctx, next.change(st.epoch, 0))
	if err != nil {
		return nil, status.Errorf(codes.Aborted, "hold writes for the %s: %v; run the command again", op, err)
	}
	return c.awaitTransition(ctx, st.epoch+1, op, to) // the hold is the next epoch
}

var errInvalidTimeout = statusError("--hold-timeout must be between 100ms and 1m; pass the longest pause writes may take, such as 5s")

type statusError string

func (e statusError) Error() string { return string(e) }

// awaitTransition waits until the hold applied at epoch hold ends and tells
// how.
func (c *Controller) awaitTransition(ctx context.Context, hold uint64, op string, to api.Mode) (*api.TransitionResult, error) {
	for {
		cur := c.state.Load()
		if cur.epoch > hold {
			if cur.rec.Mode == to && cur.rec.LastPause != nil && cur.rec.LastPause.Op == op {
				return &api.TransitionResult{Mode: to, Pause: cur.rec.LastPause}, nil
			}
			return nil, status.Errorf(codes.Aborted, "%s; the store stays in mode %s and writes go on as before: fix the cause and run the command again", cur.rec.LastAbort, cur.rec.Mode)
		}
		select {
		case <-cur.released:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func holdID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

const (
	// maxHoldLag is how far behind the replay may be when writes are held:
	// the pause is the time to replay what is left.
	maxHoldLag = 100
	// catchUpTimeout bounds the wait for the replay to come that close.
	catchUpTimeout = 30 * time.Second
)

// waitClose waits, without holding anything, until the replay is at most
// maxHoldLag revisions behind.
func (c *Controller) waitClose(ctx context.Context, st *memberState) error {
	role := map[api.Mode]string{api.Mirror: "source", api.ReplayingTo: "target"}[st.rec.Mode]
	cli, err := c.client(*st.rec.Peer, role)
	if err != nil {
		return invalid(err)
	}
	var (
		lag     int64
		readErr error
	)
	pollErr := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, catchUpTimeout, true, func(context.Context) (bool, error) {
		// Each read has its own bound, not cut short by catchUpTimeout.
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		peer, err := etcdRev(pctx, cli)
		cancel()
		lag, readErr = peer-c.st.Rev(), err
		if st.rec.Mode == api.ReplayingTo {
			lag = -lag
		}
		return err == nil && lag <= maxHoldLag, nil
	})
	switch {
	case pollErr == nil:
		return nil
	case readErr != nil:
		return status.Errorf(codes.Unavailable, "cannot read the %s's revision (%v); fix the connection and run the command again", role, readErr)
	}
	return refuse("the replay is %d revisions behind and did not come within %d in %v: the %s is written faster than the replay applies; run the command again when writes slow down", lag, maxHoldLag, catchUpTimeout, map[string]string{"source": "source", "target": "store"}[role])
}
