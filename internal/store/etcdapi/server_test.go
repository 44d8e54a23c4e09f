package etcdapi

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// serve runs the API on a loopback port for a real etcd client.
func serve(t *testing.T) *clientv3.Client {
	t.Helper()
	st, err := mvcc.Open(t.TempDir(), mvcc.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	New(st, Config{Name: "test", ProgressNotifyInterval: 200 * time.Millisecond}).Register(g)
	go g.Serve(l)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{l.Addr().String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close(); g.Stop(); st.Close() })
	return cli
}

func TestRangeStreamEqualsRange(t *testing.T) {
	cli := serve(t)
	ctx := context.Background()
	for i := 0; i < 2500; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("/r/%05d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int64{0, 10, 1500} {
		ch, err := cli.GetStream(ctx, "/r/", clientv3.WithPrefix(), clientv3.WithLimit(limit))
		if err != nil {
			t.Fatal(err)
		}
		got, err := clientv3.GetStreamToGetResponse(ch)
		if err != nil {
			t.Fatal(err)
		}
		want, err := cli.Get(ctx, "/r/", clientv3.WithPrefix(), clientv3.WithLimit(limit))
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Kvs) != len(want.Kvs) || got.Count != want.Count || got.More != want.More || got.Header.Revision != want.Header.Revision {
			t.Fatalf("limit %d: stream %d kvs count %d more %v rev %d; range %d kvs count %d more %v rev %d", limit,
				len(got.Kvs), got.Count, got.More, got.Header.Revision, len(want.Kvs), want.Count, want.More, want.Header.Revision)
		}
	}
}

func TestWatchProgressAndCompaction(t *testing.T) {
	cli := serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli.Put(ctx, "a", "1")
	r, _ := cli.Put(ctx, "a", "2")
	wctx := clientv3.WithRequireLeader(ctx)
	wch := cli.Watch(wctx, "a", clientv3.WithRev(2), clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	resp := <-wch
	if len(resp.Events) != 2 || string(resp.Events[1].PrevKv.Value) != "1" {
		t.Fatalf("history events: %+v", resp.Events)
	}
	if err := cli.RequestProgress(wctx); err != nil {
		t.Fatal(err)
	}
	for resp = range wch {
		if resp.IsProgressNotify() {
			break
		}
	}
	if resp.Header.Revision != r.Header.Revision {
		t.Fatalf("progress at %d, want %d", resp.Header.Revision, r.Header.Revision)
	}
	if _, err := cli.Compact(ctx, r.Header.Revision); err != nil {
		t.Fatal(err)
	}
	old := cli.Watch(ctx, "a", clientv3.WithRev(1))
	resp = <-old
	if resp.CompactRevision != r.Header.Revision || !resp.Canceled {
		t.Fatalf("watch below compaction: %+v", resp)
	}
}
