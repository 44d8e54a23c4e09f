package mirror

import (
	"context"
	"errors"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// forwarder sends a mirror's writes to its source (etcdapi.Forwarder). The
// requests go as they came (etcd's own messages); each answer is returned
// once the local state has applied its revision.
type forwarder struct {
	c     *Controller
	cli   *clientv3.Client
	kv    pb.KVClient
	lease pb.LeaseClient
}

func newForwarder(c *Controller, cli *clientv3.Client) *forwarder {
	return &forwarder{c: c, cli: cli, kv: pb.NewKVClient(cli.ActiveConnection()), lease: pb.NewLeaseClient(cli.ActiveConnection())}
}

// errTookOver answers a forwarded write whose revision the store never
// applied because it became the owner meanwhile: the write may be in the
// source, but it is not in the store, so it is not acknowledged.
var errTookOver = status.Error(codes.Unavailable,
	"the store took over from its source while this write was in flight; it is not in the store: retry it")

// waitApplied returns once the local state has applied rev, as a mirror
// (or as an owner that took over at or after rev).
func (c *Controller) waitApplied(ctx context.Context, rev int64) error {
	for {
		st, changed := c.state.Load(), c.changedCh()
		if st.rec.Mode != api.Mirror && rev > st.rec.Since {
			return errTookOver
		}
		if c.st.Rev() >= rev {
			return nil
		}
		// Wait for rev, or for a mode change (then check again).
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-changed:
				cancel()
			case <-wctx.Done():
			}
		}()
		err := c.st.WaitRev(wctx, rev)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
}

func (f *forwarder) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	resp, err := f.kv.Put(ctx, r)
	if err != nil {
		return nil, err
	}
	return resp, f.c.waitApplied(ctx, resp.Header.Revision)
}

func (f *forwarder) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	resp, err := f.kv.DeleteRange(ctx, r)
	if err != nil {
		return nil, err
	}
	return resp, f.c.waitApplied(ctx, resp.Header.Revision)
}

func (f *forwarder) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	resp, err := f.kv.Txn(ctx, r)
	if err != nil {
		return nil, err
	}
	return resp, f.c.waitApplied(ctx, resp.Header.Revision)
}

// Compact compacts the source, then the store at the same revision once it
// has applied it (compactions are not in the source's watch).
func (f *forwarder) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	resp, err := f.kv.Compact(ctx, r)
	if err != nil {
		return nil, err
	}
	if err := f.c.waitApplied(ctx, r.Revision); err != nil {
		return nil, err
	}
	if _, err := f.c.st.Compact(ctx, r.Revision, r.Physical); err != nil && !errors.Is(err, mvcc.ErrCompacted) {
		f.c.log.Warn("mirror: the source compacted, the store could not", "revision", r.Revision, "err", err)
	}
	return resp, nil
}

// LeaseGrant grants on the source, then the same lease on the store, so a
// client that uses it after a cut-over finds it.
func (f *forwarder) LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	resp, err := f.lease.LeaseGrant(ctx, r)
	if err != nil {
		return nil, err
	}
	b := &mvcc.ReplayBatch{Grants: []mvcc.LeaseGrant{{ID: resp.ID, TTL: resp.TTL}}}
	if _, err := f.c.st.Replay(ctx, b); err != nil {
		f.c.log.Warn("mirror: lease granted on the source, not yet on the store (the replay grants it when a key uses it)", "lease", resp.ID, "err", err)
	}
	return resp, nil
}

// LeaseRevoke revokes on the source, then on the store once the replay has
// deleted the lease's keys.
func (f *forwarder) LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	resp, err := f.lease.LeaseRevoke(ctx, r)
	if err != nil {
		return nil, err
	}
	if err := f.c.waitApplied(ctx, resp.Header.Revision); err != nil {
		return nil, err
	}
	if _, err := f.c.st.Replay(ctx, &mvcc.ReplayBatch{Revokes: []int64{r.ID}}); err != nil {
		f.c.log.Warn("mirror: lease revoked on the source, not yet on the store (the replay's sweep revokes it)", "lease", r.ID, "err", err)
	}
	return resp, nil
}

func (f *forwarder) LeaseKeepAlive(ctx context.Context, id int64) (int64, error) {
	resp, err := f.cli.KeepAliveOnce(ctx, clientv3.LeaseID(id))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return 0, mvcc.ErrLeaseNotFound
	}
	if err != nil {
		return 0, err
	}
	return resp.TTL, nil
}

func (f *forwarder) LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	return f.lease.LeaseTimeToLive(ctx, r)
}

func (f *forwarder) LeaseLeases(ctx context.Context, r *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	return f.lease.LeaseLeases(ctx, r)
}
