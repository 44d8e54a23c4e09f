package mirror

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdSource reads an etcd cluster.
type etcdSource struct {
	cli  *clientv3.Client
	name string
}

func (s *etcdSource) Name() string { return s.name }

// etcdRev reads a cluster's current revision with one linearizable range
// of a single key.
func etcdRev(ctx context.Context, cli *clientv3.Client) (int64, error) {
	resp, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

func (s *etcdSource) Rev(ctx context.Context) (int64, error) {
	rev, err := etcdRev(ctx, s.cli)
	if err != nil {
		return 0, fmt.Errorf("read %s's revision: %w", s.name, err)
	}
	return rev, nil
}

// Watch watches every key from after+1 with the previous key-values. A
// member that loses its leader ends the watch (WithRequireLeader), so a
// partitioned member never feeds stale history.
func (s *etcdSource) Watch(ctx context.Context, after int64) <-chan WatchResult {
	out := make(chan WatchResult, 64)
	wch := s.cli.Watch(clientv3.WithRequireLeader(ctx), "\x00", clientv3.WithRange("\x00"), clientv3.WithRev(after+1),
		clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	go func() {
		defer close(out)
		for resp := range wch {
			r := WatchResult{Rev: resp.Header.Revision}
			switch {
			case resp.CompactRevision != 0:
				r.Err = &SourceCompactedError{Source: s.name, Need: after + 1, Compacted: resp.CompactRevision}
			case resp.Err() != nil:
				r.Err = fmt.Errorf("watch %s: %w", s.name, resp.Err())
			default:
				evs := make([]*mvccpb.Event, len(resp.Events))
				for i, ev := range resp.Events {
					evs[i] = (*mvccpb.Event)(ev)
				}
				r.Changes = appendEvents(nil, evs)
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
		if ctx.Err() == nil {
			select {
			case out <- WatchResult{Err: fmt.Errorf("watch %s ended", s.name)}:
			case <-ctx.Done():
			}
		}
	}()
	return out
}

func (s *etcdSource) LeaseTTL(ctx context.Context, id int64) (int64, bool, error) {
	resp, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(id))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("lease %x on %s: %w", id, s.name, err)
	}
	if resp.TTL == -1 {
		return 0, false, nil
	}
	return resp.GrantedTTL, true, nil
}

func (s *etcdSource) Leases(ctx context.Context) ([]int64, error) {
	resp, err := s.cli.Leases(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s's leases: %w", s.name, err)
	}
	ids := make([]int64, len(resp.Leases))
	for i, l := range resp.Leases {
		ids[i] = int64(l.ID)
	}
	return ids, nil
}

func (s *etcdSource) Digest(ctx context.Context, rev int64) (Digest, error) {
	return etcdDigest(ctx, s.cli, s.name, rev)
}
