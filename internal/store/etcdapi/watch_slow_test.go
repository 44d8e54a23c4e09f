package etcdapi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// slowClientWrites is how many single-put revisions are written while one
// stream's client does not read: more than gRPC's 64 KiB stream window, the
// server's send quota and the store's per-stream queue (1024 responses)
// hold together, so the store must fall back to replaying that stream's
// watcher from disk (the mvcc slow-watcher tests check that part directly).
const slowClientWrites = 2500

// slowClientTimeout bounds a hang only; nothing asserts how long a step took.
const slowClientTimeout = 3 * time.Minute

// openRawWatch opens a Watch stream on conn, creates one watch on prefix and
// reads its created response.
func openRawWatch(ctx context.Context, t *testing.T, conn *grpc.ClientConn, prefix string) pb.Watch_WatchClient {
	t.Helper()
	st, err := pb.NewWatchClient(conn).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	create := &pb.WatchCreateRequest{Key: []byte(prefix), RangeEnd: []byte(clientv3.GetPrefixRangeEnd(prefix))}
	if err := st.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: create}}); err != nil {
		t.Fatal(err)
	}
	if r, err := st.Recv(); err != nil || !r.Created {
		t.Fatalf("create watch on %s: %v %v", prefix, r, err)
	}
	return st
}

// recvEvents reads st until it has n events or fails.
func recvEvents(st pb.Watch_WatchClient, n int) ([]*mvccpb.Event, error) {
	var evs []*mvccpb.Event
	for len(evs) < n {
		r, err := st.Recv()
		if err != nil {
			return evs, fmt.Errorf("after %d events: %w", len(evs), err)
		}
		if r.Canceled {
			return evs, fmt.Errorf("after %d events: canceled: %v", len(evs), r)
		}
		evs = append(evs, r.Events...)
	}
	return evs, nil
}

// checkEvents fails unless evs are the puts of keys, one a revision from
// from on, each once and in order.
func checkEvents(t *testing.T, name string, evs []*mvccpb.Event, keys map[int64]string, from int64) {
	t.Helper()
	if len(evs) != len(keys) {
		t.Fatalf("%s: %d events, want %d", name, len(evs), len(keys))
	}
	for i, ev := range evs {
		rev := from + int64(i)
		if ev.Type != mvccpb.PUT || ev.Kv.ModRevision != rev || string(ev.Kv.Key) != keys[rev] {
			t.Fatalf("%s: event %d is %v %q at %d, want a put of %q at %d", name, i, ev.Type, ev.Kv.Key, ev.Kv.ModRevision, keys[rev], rev)
		}
	}
}

// TestWatchStreamWhoseClientStopsReading: one gRPC watch stream's client
// stops reading. Writers go on (every put returns), another stream on the
// same connection gets every event meanwhile, and once the slow client reads
// again its stream delivers every event, in order and once.
func TestWatchStreamWhoseClientStopsReading(t *testing.T) {
	cli := serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), slowClientTimeout)
	defer cancel()
	// A fixed 64 KiB stream window (no BDP growth), so a client that does
	// not read stalls the server's sends to that stream quickly.
	conn, err := grpc.NewClient(cli.Endpoints()[0], grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	slow := openRawWatch(ctx, t, conn, "s/")
	other := openRawWatch(ctx, t, conn, "s/")
	otherDone := make(chan error, 1)
	var otherEvents []*mvccpb.Event
	go func() {
		var err error
		otherEvents, err = recvEvents(other, slowClientWrites)
		otherDone <- err
	}()

	value := strings.Repeat("v", 1<<10)
	keys := make(map[int64]string, slowClientWrites)
	var from int64
	for i := 0; i < slowClientWrites; i++ {
		k := fmt.Sprintf("s/%05d", i)
		r, err := cli.Put(ctx, k, value)
		if err != nil {
			t.Fatalf("put %d while a stream does not read: %v", i, err)
		}
		if i == 0 {
			from = r.Header.Revision
		}
		keys[r.Header.Revision] = k
	}
	if err := <-otherDone; err != nil {
		t.Fatalf("the other stream on the connection, while one did not read: %v", err)
	}
	checkEvents(t, "other stream", otherEvents, keys, from)

	evs, err := recvEvents(slow, slowClientWrites)
	if err != nil {
		t.Fatalf("slow stream once read: %v", err)
	}
	checkEvents(t, "slow stream", evs, keys, from)
}
