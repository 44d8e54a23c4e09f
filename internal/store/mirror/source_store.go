package mirror

import (
	"context"
	"errors"
	"fmt"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// storeSource reads the local store: the leader replays what it applied.
type storeSource struct {
	st *mvcc.Store
}

func (s *storeSource) Name() string { return "the store" }

func (s *storeSource) Rev(context.Context) (int64, error) { return s.st.Rev(), nil }

func (s *storeSource) Watch(ctx context.Context, after int64) <-chan WatchResult {
	out := make(chan WatchResult, 64)
	ws := s.st.NewWatchStream()
	if _, err := ws.Watch(mvcc.WatchOptions{Key: []byte{0}, End: []byte{0}, StartRev: after + 1, PrevKV: true}); err != nil {
		out <- WatchResult{Err: fmt.Errorf("watch the store: %w", err)}
		close(out)
		ws.Close()
		return out
	}
	go func() {
		defer close(out)
		defer ws.Close()
		for {
			resps, err := ws.Next(ctx)
			if err != nil {
				if ctx.Err() == nil {
					out <- WatchResult{Err: fmt.Errorf("watch the store: %w", err)}
				}
				return
			}
			for _, resp := range resps {
				r := WatchResult{Rev: resp.GetHeader().GetRevision()}
				switch {
				case resp.CompactRevision != 0:
					r.Err = &SourceCompactedError{Source: s.Name(), Need: after + 1, Compacted: resp.CompactRevision}
				case resp.Canceled:
					r.Err = fmt.Errorf("watch the store: canceled: %s", resp.CancelReason)
				default:
					r.Changes = appendEvents(nil, resp.Events)
				}
				select {
				case out <- r:
				case <-ctx.Done():
					return
				}
				if r.Err != nil {
					return
				}
			}
		}
	}()
	return out
}

func (s *storeSource) LeaseTTL(_ context.Context, id int64) (int64, bool, error) {
	l, err := s.st.LeaseTimeToLive(id, false)
	if errors.Is(err, mvcc.ErrLeaseNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return l.GrantedTTL, true, nil
}

func (s *storeSource) Leases(context.Context) ([]int64, error) { return s.st.Leases(), nil }

func (s *storeSource) Digest(ctx context.Context, rev int64) (Digest, error) {
	return storeDigest(ctx, s.st, rev)
}
