package movecopy

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// TestRunCopiesEtcdWithItsRevisions copies a real etcd (QK_ETCD) in pages
// smaller than its keyspace and checks the figures Run returns and the
// store it leaves: every key with etcd's value and revisions, the lease,
// the store at etcd's revision.
func TestRunCopiesEtcdWithItsRevisions(t *testing.T) {
	ctx := context.Background()
	cli := startEtcd(t)
	lease, err := cli.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	const n = 250
	for i := 0; i < n; i++ {
		var opts []clientv3.OpOption
		if i%10 == 0 {
			opts = append(opts, clientv3.WithLease(lease.ID))
		}
		if _, err := cli.Put(ctx, fmt.Sprintf("/registry/k/%04d", i), fmt.Sprintf("v%d", i), opts...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Put(ctx, "/registry/k/0003", "updated"); err != nil {
		t.Fatal(err)
	}
	want, err := cli.Get(ctx, "\x00", clientv3.WithRange("\x00"))
	if err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "copy")
	stats, err := Run(ctx, cli, dir, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Keys != int64(len(want.Kvs)) || stats.Leases != 1 || stats.Revision != want.Header.Revision {
		t.Fatalf("Run = %+v; want %d keys, 1 lease, revision %d", stats, len(want.Kvs), want.Header.Revision)
	}
	if stats.Duration <= 0 || stats.Rate() <= 0 {
		t.Fatalf("Run = %+v: no duration or rate", stats)
	}

	st, err := mvcc.Open(dir, mvcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Rev() != want.Header.Revision {
		t.Fatalf("copied store at revision %d, etcd at %d", st.Rev(), want.Header.Revision)
	}
	got, err := st.Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != len(want.Kvs) {
		t.Fatalf("copied store has %d keys, etcd %d", len(got.Kvs), len(want.Kvs))
	}
	for i, kv := range got.Kvs {
		w := want.Kvs[i]
		if string(kv.Key) != string(w.Key) || string(kv.Value) != string(w.Value) || kv.CreateRevision != w.CreateRevision ||
			kv.ModRevision != w.ModRevision || kv.Version != w.Version || kv.Lease != w.Lease {
			t.Fatalf("key %d: copied %v, etcd has %v", i, kv, w)
		}
	}
}

// startEtcd runs a real etcd (QK_ETCD; scripts/test.sh sets it) for the test.
func startEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	bin := os.Getenv("QK_ETCD")
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and QK_ETCD is not set; scripts/test.sh sets it from scripts/deps.sh")
		}
		t.Skip("QK_ETCD is not set; run `eval $(scripts/deps.sh env etcd)` first")
	}
	dir := t.TempDir()
	client, peer := "http://"+freeAddr(t), "http://"+freeAddr(t)
	cmd := exec.Command(bin, "--data-dir", filepath.Join(dir, "etcd"), "--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "default="+peer)
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = logf.Close() })
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "probe")
		cancel()
		if err == nil {
			return cli
		}
		if i > 100 {
			t.Fatalf("etcd did not start: %v (log: %s)", err, logf.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
