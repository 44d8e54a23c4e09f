package storemove

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// startEtcd runs a real etcd (QK_ETCD) for the test.
func startEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	bin := os.Getenv("QK_ETCD")
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and QK_ETCD is not set; scripts/test.sh sets it from scripts/deps.sh")
		}
		t.Skip("QK_ETCD is not set; run `eval $(scripts/deps.sh env etcd)` first")
	}
	port := freePort(t)
	peer := freePort(t)
	dir := t.TempDir()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	cmd := exec.Command(bin, "--data-dir", filepath.Join(dir, "etcd"), "--listen-client-urls", url, "--advertise-client-urls", url,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer), "--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", peer))
	logf, _ := os.Create(filepath.Join(dir, "etcd.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "probe")
		cancel()
		if err == nil {
			break
		}
		if i > 100 {
			t.Fatalf("etcd did not start: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cli
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestCopyKeepsRevisions copies a live etcd into a store while it is being
// written to, then catches up after writes stop: both sides must digest the
// same at etcd's final revision, key by key with the same revisions.
func TestCopyKeepsRevisions(t *testing.T) {
	ctx := context.Background()
	cli := startEtcd(t)
	lease, err := cli.Grant(ctx, 300)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2500; i++ {
		opts := []clientv3.OpOption{}
		if i%10 == 0 {
			opts = append(opts, clientv3.WithLease(lease.ID))
		}
		if _, err := cli.Put(ctx, fmt.Sprintf("/registry/cm/%05d", i), fmt.Sprintf("v%d", i), opts...); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 100; i++ { // history: several versions
		cli.Put(ctx, "/registry/hot", fmt.Sprint(i))
	}
	cli.Delete(ctx, "/registry/cm/00007")

	st, err := mvcc.Open(t.TempDir(), mvcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := &Copier{Etcd: cli, Store: st, PageSize: 300}

	// Writers keep going during the bulk copy and the follow.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("/registry/live/%d/%d", w, i%50)
				switch i % 7 {
				case 3:
					cli.Delete(ctx, k)
				case 5:
					l, err := cli.Grant(ctx, 120)
					if err == nil {
						cli.Put(ctx, k, "leased", clientv3.WithLease(l.ID))
					}
				default:
					cli.Txn(ctx).Then(clientv3.OpPut(k, fmt.Sprint(i)), clientv3.OpPut(k+"/twin", fmt.Sprint(i))).Commit()
				}
			}
		}(w)
	}
	stats, err := c.Bulk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bulk: %d keys, %d leases at revision %d in %v (%.0f keys/s)", stats.Keys, stats.Leases, stats.Revision, stats.Duration, stats.Rate())
	fctx, fcancel := context.WithCancel(ctx)
	ferr := make(chan error, 1)
	go func() { ferr <- c.Follow(fctx) }()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	final, err := c.CatchUp(cctx)
	if err != nil {
		t.Fatal(err)
	}
	fcancel()
	<-ferr
	if st.Rev() != final {
		t.Fatalf("store at revision %d, etcd at %d", st.Rev(), final)
	}
	want, err := EtcdDigest(ctx, cli, final, 500)
	if err != nil {
		t.Fatal(err)
	}
	got, err := StoreDigest(ctx, st, final)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("digests differ: store %v, etcd %v", got, want)
	}
	t.Logf("etcd and store agree: %v (followed %d revisions)", got, final-stats.Revision)
	// The lease attached during the bulk copy still holds its keys.
	l, err := st.LeaseTimeToLive(int64(lease.ID), true)
	if err != nil || len(l.Keys) != 250 {
		t.Fatalf("lease %x after copy: %+v %v", lease.ID, l, err)
	}
}

// TestPageKeys: pages after the first hold about pageBytes, within their
// bounds in keys.
func TestPageKeys(t *testing.T) {
	for _, c := range []struct {
		keys, bytes int64
		want        int
	}{
		{0, 0, DefaultPageSize},
		{1000, 1000 * 1060, pageBytes / 1060}, // the bench's keys: ~7,900 a page
		{1000, 1000, maxPageKeys},             // tiny values
		{10, 10 << 20, minPageKeys},           // 1 MiB objects
		{1000, 1000 * 100 << 10, minPageKeys}, // 100 KiB objects
		{1000, 1000 * 4 << 10, pageBytes / (4 << 10)},
	} {
		if got := pageKeys(c.keys, c.bytes); got != c.want {
			t.Errorf("pageKeys(%d, %d) = %d, want %d", c.keys, c.bytes, got, c.want)
		}
	}
}

// TestPageSizerGrowsPagesGeometrically: after the first page, each is at
// most twice the one before, up to what pageKeys allows by bytes.
func TestPageSizerGrowsPagesGeometrically(t *testing.T) {
	page := func(n, valueSize int) []*mvccpb.KeyValue {
		kvs := make([]*mvccpb.KeyValue, n)
		for i := range kvs {
			kvs[i] = &mvccpb.KeyValue{Key: make([]byte, 36), Value: make([]byte, valueSize)}
		}
		return kvs
	}
	for _, c := range []struct {
		valueSize int
		want      []int
	}{
		{1024, []int{1000, 2000, 4000, pageBytes / 1060, pageBytes / 1060}},
		{10, []int{1000, 2000, 4000, 8000, 16000, 32000, maxPageKeys, maxPageKeys}},
		{64 << 10, []int{1000, pageBytes / (64<<10 + 36), pageBytes / (64<<10 + 36)}},
	} {
		var p pageSizer
		var got []int
		for range c.want {
			n := p.size()
			got = append(got, n)
			p.read(page(n, c.valueSize))
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("values of %d bytes: pages %v, want %v", c.valueSize, got, c.want)
		}
	}
	if p := (pageSizer{fixed: 500}); p.size() != 500 {
		t.Errorf("fixed pages of 500: %d", p.size())
	}
}

// TestBulkCopySizesPagesByBytes copies a key space whose pages change size
// (a first page of DefaultPageSize keys, then pages sized by bytes) and
// whose values change size along the way: the store must hold exactly
// etcd's keys at the copied revision, and the other walks that page by
// bytes (the verify step's digest, the undo's pager) see the same keys.
func TestBulkCopySizesPagesByBytes(t *testing.T) {
	ctx := context.Background()
	cli := startEtcd(t)
	big := strings.Repeat("b", 32<<10) // 32 KiB: pages of 256 keys after the first
	for i := 0; i < 1800; i++ {
		v := fmt.Sprintf("v%d", i)
		if i >= 600 && i < 1500 {
			v = big + v
		}
		if _, err := cli.Put(ctx, fmt.Sprintf("/registry/cm/%05d", i), v); err != nil {
			t.Fatal(err)
		}
	}
	st, err := mvcc.Open(t.TempDir(), mvcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := &Copier{Etcd: cli, Store: st}
	stats, err := c.Bulk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Keys != 1800 {
		t.Fatalf("copied %d keys, want 1800", stats.Keys)
	}
	want, err := EtcdDigest(ctx, cli, stats.Revision, 500)
	if err != nil {
		t.Fatal(err)
	}
	got, err := StoreDigest(ctx, st, stats.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("digests differ: store %v, etcd %v", got, want)
	}
	// The verify step's digest pages by bytes and by count alike.
	if sized, err := EtcdDigest(ctx, cli, stats.Revision, 0); err != nil || sized != want {
		t.Fatalf("digest in pages sized by bytes: %v, %v; in pages of 500: %v", sized, err, want)
	}
}
