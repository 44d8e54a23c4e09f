package keyspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrUnimplemented means the server does not offer RangeStream.
var ErrUnimplemented = errors.New("RangeStream is not implemented by this server")

// PagedRange lists the whole key space the way kube-apiserver pages a list:
// pages of pageSize, every page after the first at the first page's revision.
// It returns the time taken and checks that want keys came back.
func PagedRange(ctx context.Context, c *clientv3.Client, pageSize int64, want int) (time.Duration, error) {
	start := time.Now()
	key, end := Prefix, clientv3.GetPrefixRangeEnd(Prefix)
	var rev int64
	got := 0
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(pageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := c.Get(ctx, key, opts...)
		if err != nil {
			return 0, fmt.Errorf("paged range at %s (revision %d): %w", key, rev, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		got += len(resp.Kvs)
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	d := time.Since(start)
	if got != want {
		return d, fmt.Errorf("paged range returned %d keys, want %d", got, want)
	}
	return d, nil
}

// RangeStream lists the whole key space with one RangeStream call (etcd API
// 3.7). It returns ErrUnimplemented when the server does not have it.
func RangeStream(ctx context.Context, c *clientv3.Client, want int) (time.Duration, error) {
	kv := pb.NewKVClient(c.ActiveConnection())
	start := time.Now()
	stream, err := kv.RangeStream(ctx, &pb.RangeRequest{Key: []byte(Prefix), RangeEnd: []byte(clientv3.GetPrefixRangeEnd(Prefix))})
	if err != nil {
		return 0, classify(err)
	}
	got := 0
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, classify(err)
		}
		if resp.RangeResponse != nil {
			got += len(resp.RangeResponse.Kvs)
		}
	}
	d := time.Since(start)
	if got != want {
		return d, fmt.Errorf("RangeStream returned %d keys, want %d", got, want)
	}
	return d, nil
}

func classify(err error) error {
	if status.Code(err) == codes.Unimplemented {
		return ErrUnimplemented
	}
	return fmt.Errorf("RangeStream: %w", err)
}
