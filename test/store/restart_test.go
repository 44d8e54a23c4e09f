package storee2e

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestSigtermAndListeners checks a clean stop and what the server listens on:
// SIGTERM with open watches ends the process within 15 s and exit status 0,
// the data is there after a restart, and every --listen-client-urls URL serves
// the same data.
func TestSigtermAndListeners(t *testing.T) {
	s := startServer(t, serverOptions{MoreClientURLs: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The second listener serves the same store.
	cli := s.Client()
	resp, err := cli.Put(ctx, "term/a", "1")
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	other, err := clientv3.New(clientv3.Config{Endpoints: s.MoreURLs, TLS: s.TLSConfig(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("client of %v: %v", s.MoreURLs, err)
	}
	r, err := other.Get(ctx, "term/a")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "1" || r.Header.Revision != resp.Header.Revision {
		t.Fatalf("get term/a on the second client URL %s: %+v %v; want 1 at revision %d", s.MoreURLs[0], r, err, resp.Header.Revision)
	}
	other.Close()

	// Open watches must not hold the stop up.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	w1 := cli.Watch(wctx, "term/", clientv3.WithPrefix())
	w2 := cli.Watch(wctx, "other/", clientv3.WithPrefix(), clientv3.WithProgressNotify())
	_ = w2
	if _, err := cli.Put(ctx, "term/b", "2"); err != nil {
		t.Fatalf("put: %v", err)
	}
	select {
	case <-w1:
	case <-time.After(10 * time.Second):
		t.Fatalf("watch saw nothing in 10s")
	}

	took, err := s.Stop(15 * time.Second)
	// etcd cleans up, then re-raises the signal: "signal: terminated" is a clean stop too.
	if err != nil && err.Error() != "signal: terminated" {
		t.Fatalf("exit after SIGTERM (in %v): %v; want status 0 (or death by the re-raised SIGTERM)", took.Round(time.Millisecond), err)
	}
	t.Logf("%s exited %v after SIGTERM with 2 open watches", s.Kind, took.Round(time.Millisecond))
	wcancel()
	cli.Close()

	s.Start()
	cli = s.Client()
	defer cli.Close()
	r, err = cli.Get(ctx, "term/", clientv3.WithPrefix())
	if err != nil || len(r.Kvs) != 2 || r.Header.Revision != resp.Header.Revision+1 {
		t.Fatalf("after a clean restart: %+v %v; want term/a and term/b at revision %d", r, err, resp.Header.Revision+1)
	}
}
