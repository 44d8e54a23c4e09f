package mirror

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/quantyroot/quantykube/internal/store/etcdapi"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// startEtcd runs an in-process etcd (etcd's embed package) on loopback.
func startEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.Name = "e1"
	cfg.LogLevel = "error"
	cfg.UnsafeNoFsync = true
	curl, purl := freeURL(t), freeURL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{curl}, []url.URL{curl}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{purl}, []url.URL{purl}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready after 30 s")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{curl.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func freeURL(t *testing.T) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

func openStore(t *testing.T) *mvcc.Store {
	t.Helper()
	st, err := mvcc.Open(t.TempDir(), mvcc.Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// allKVs reads every key of an etcd-API cluster at rev.
func allKVs(t *testing.T, cli *clientv3.Client, rev int64) map[string]*mvccpb.KeyValue {
	t.Helper()
	resp, err := cli.Get(context.Background(), "\x00", clientv3.WithRange("\x00"), clientv3.WithRev(rev))
	if err != nil {
		t.Fatalf("get all at %d: %v", rev, err)
	}
	out := map[string]*mvccpb.KeyValue{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = kv
	}
	return out
}

func kvString(kv *mvccpb.KeyValue) string {
	if kv == nil {
		return "<absent>"
	}
	return fmt.Sprintf("%q=%q c%d m%d v%d l%x", kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease)
}

// storeKVs reads every key of the store at rev.
func storeKVs(t *testing.T, st *mvcc.Store, rev int64) map[string]*mvccpb.KeyValue {
	t.Helper()
	resp, err := st.Range(context.Background(), &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: rev})
	if err != nil {
		t.Fatalf("store range at %d: %v", rev, err)
	}
	out := map[string]*mvccpb.KeyValue{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = kv
	}
	return out
}

func sameKVs(t *testing.T, what string, got, want map[string]*mvccpb.KeyValue) {
	t.Helper()
	bad := 0
	for k, w := range want {
		g := got[k]
		if g == nil || g.CreateRevision != w.CreateRevision || g.ModRevision != w.ModRevision || g.Version != w.Version ||
			g.Lease != w.Lease || string(g.Value) != string(w.Value) {
			if bad++; bad <= 5 {
				t.Errorf("%s: key %q: got %s, want %s", what, k, kvString(g), kvString(w))
			}
		}
	}
	for k, g := range got {
		if want[k] == nil {
			if bad++; bad <= 5 {
				t.Errorf("%s: extra key %s", what, kvString(g))
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d keys differ", what, bad)
	}
}

// serveStore serves st's etcd API (with mirror m, if any) on loopback and
// returns a client of it.
func serveStore(t *testing.T, st *mvcc.Store, m etcdapi.Mirror) *clientv3.Client {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	etcdapi.New(st, etcdapi.Config{Name: "qk", Mirror: m, Logger: testLog()}).Register(g)
	go g.Serve(l)
	t.Cleanup(g.Stop)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + l.Addr().String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
