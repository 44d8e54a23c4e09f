package storee2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestLimitsAndErrors checks the limits and error answers clients map by
// their exact gRPC code and message (rpctypes): request size, txn size,
// duplicate keys, empty keys, unknown leases, future revisions; and the
// starting state of a fresh server (revision 1).
func TestLimitsAndErrors(t *testing.T) {
	s := startServer(t, serverOptions{NoFsync: true})
	cli := bigClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("FreshStoreAtRevision1", func(t *testing.T) {
		r, err := cli.Get(ctx, "anything", clientv3.WithPrefix())
		if err != nil || r.Header.Revision != 1 || len(r.Kvs) != 0 {
			t.Fatalf("fresh server: %+v %v; want revision 1 and no keys", r, err)
		}
	})

	t.Run("RequestSize", func(t *testing.T) {
		big := strings.Repeat("x", 1<<20) // 1 MiB fits the default 1.5 MiB
		if _, err := cli.Put(ctx, "lim/big", big); err != nil {
			t.Fatalf("put 1 MiB: %v", err)
		}
		r, err := cli.Get(ctx, "lim/big")
		if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != big {
			t.Fatalf("get the 1 MiB value back: %v (kvs %d)", err, len(r.Kvs))
		}
		tooBig := strings.Repeat("y", 1600*1024) // over 1.5 MiB
		if _, err := cli.Put(ctx, "lim/toobig", tooBig); !errors.Is(err, rpctypes.ErrRequestTooLarge) {
			t.Fatalf("put 1.6 MiB: %v; want %v", err, rpctypes.ErrRequestTooLarge)
		}
	})

	t.Run("TxnOps", func(t *testing.T) {
		if _, err := cli.Txn(ctx).Then(puts("lim/ops/", 128)...).Commit(); err != nil {
			t.Fatalf("txn with 128 puts: %v", err)
		}
		if _, err := cli.Txn(ctx).Then(puts("lim/ops/", 129)...).Commit(); !errors.Is(err, rpctypes.ErrTooManyOps) {
			t.Fatalf("txn with 129 puts: %v; want %v", err, rpctypes.ErrTooManyOps)
		}
		_, err := cli.Txn(ctx).Then(clientv3.OpPut("lim/dup", "a"), clientv3.OpPut("lim/dup", "b")).Commit()
		if !errors.Is(err, rpctypes.ErrDuplicateKey) {
			t.Fatalf("txn putting one key twice: %v; want %v", err, rpctypes.ErrDuplicateKey)
		}
		// Nested txn: the inner compare decides the inner branch.
		r, err := cli.Txn(ctx).Then(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Version("lim/none"), "=", 0)},
			[]clientv3.Op{clientv3.OpPut("lim/nested", "then")},
			[]clientv3.Op{clientv3.OpPut("lim/nested", "else")},
		)).Commit()
		if err != nil || !r.Succeeded || !r.Responses[0].GetResponseTxn().Succeeded {
			t.Fatalf("nested txn: %+v %v; want both levels to succeed", r, err)
		}
		if g, err := cli.Get(ctx, "lim/nested"); err != nil || len(g.Kvs) != 1 || string(g.Kvs[0].Value) != "then" {
			t.Fatalf("nested txn result: %+v %v; want lim/nested=then", g, err)
		}
	})

	t.Run("BadRequests", func(t *testing.T) {
		if _, err := cli.Put(ctx, "", "v"); !errors.Is(err, rpctypes.ErrEmptyKey) {
			t.Fatalf("put with an empty key: %v; want %v", err, rpctypes.ErrEmptyKey)
		}
		if _, err := cli.Put(ctx, "lim/l", "v", clientv3.WithLease(0x1234567)); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			t.Fatalf("put on an unknown lease: %v; want %v", err, rpctypes.ErrLeaseNotFound)
		}
		r, err := cli.Get(ctx, "lim/")
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if _, err := cli.Get(ctx, "lim/big", clientv3.WithRev(r.Header.Revision+1)); !errors.Is(err, rpctypes.ErrFutureRev) {
			t.Fatalf("get at a future revision: %v; want %v", err, rpctypes.ErrFutureRev)
		}
		if _, err := cli.Revoke(ctx, 0x7654321); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			t.Fatalf("revoke an unknown lease: %v; want %v", err, rpctypes.ErrLeaseNotFound)
		}
	})

	t.Run("LeaseGrantWithID", func(t *testing.T) {
		lc := pb.NewLeaseClient(cli.ActiveConnection())
		r, err := lc.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 0x5151, TTL: 60})
		if err != nil || r.ID != 0x5151 || r.TTL != 60 {
			t.Fatalf("grant lease with ID 0x5151: %+v %v; want that ID and TTL 60", r, err)
		}
		if _, err := lc.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 0x5151, TTL: 60}); err == nil || !strings.Contains(err.Error(), rpctypes.ErrLeaseExist.Error()) {
			t.Fatalf("grant the same lease ID twice: %v; want %q", err, rpctypes.ErrLeaseExist)
		}
		if _, err := cli.Grant(ctx, 9_000_000_001); !errors.Is(err, rpctypes.ErrLeaseTTLTooLarge) {
			t.Fatalf("grant a lease over the 9e9 s maximum TTL: %v; want %v", err, rpctypes.ErrLeaseTTLTooLarge)
		}
	})

	t.Run("ConfiguredLimits", func(t *testing.T) {
		small := startServer(t, serverOptions{NoFsync: true, ExtraArgs: []string{"--max-request-bytes=65536", "--max-txn-ops=4"}})
		c := bigClient(t, small)
		if _, err := c.Put(ctx, "k", strings.Repeat("z", 60*1024)); err != nil {
			t.Fatalf("put 60 KiB under --max-request-bytes=65536: %v", err)
		}
		if _, err := c.Put(ctx, "k", strings.Repeat("z", 70*1024)); !errors.Is(err, rpctypes.ErrRequestTooLarge) {
			t.Fatalf("put 70 KiB under --max-request-bytes=65536: %v; want %v", err, rpctypes.ErrRequestTooLarge)
		}
		if _, err := c.Txn(ctx).Then(puts("ops/", 4)...).Commit(); err != nil {
			t.Fatalf("txn with 4 puts under --max-txn-ops=4: %v", err)
		}
		if _, err := c.Txn(ctx).Then(puts("ops/", 5)...).Commit(); !errors.Is(err, rpctypes.ErrTooManyOps) {
			t.Fatalf("txn with 5 puts under --max-txn-ops=4: %v; want %v", err, rpctypes.ErrTooManyOps)
		}
	})
}

// bigClient is a client whose own message limits are above the server's, so
// that size limits are the server's to enforce.
func bigClient(t *testing.T, s *server) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:          []string{s.ClientURL},
		TLS:                s.TLSConfig(),
		DialTimeout:        5 * time.Second,
		MaxCallSendMsgSize: 8 << 20,
		MaxCallRecvMsgSize: 8 << 20,
		Logger:             zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcd client for %s: %v", s.ClientURL, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// puts is n puts to prefix0..prefix(n-1).
func puts(prefix string, n int) []clientv3.Op {
	ops := make([]clientv3.Op, n)
	for i := range ops {
		ops[i] = clientv3.OpPut(fmt.Sprintf("%s%03d", prefix, i), "v")
	}
	return ops
}
