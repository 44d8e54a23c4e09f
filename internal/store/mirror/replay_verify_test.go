package mirror

import (
	"context"
	"errors"
	"testing"
	"time"
)

// gatedDigest is a source whose Digest waits for release: a comparison
// that takes as long as a test needs (at 5,000 objects it takes ~1 s).
type gatedDigest struct {
	Source
	release chan struct{}
}

func (g gatedDigest) Digest(ctx context.Context, rev int64) (Digest, error) {
	select {
	case <-g.release:
	case <-ctx.Done():
		return Digest{}, ctx.Err()
	}
	return g.Source.Digest(ctx, rev)
}

// A replay applies the source's changes while its start is still being
// compared (so a mirror's reads and writes, which wait for the replay, do
// not wait for the comparison), but serves no level request until the
// comparison found both sides identical.
func TestReplayAppliesWhileItsStartIsVerified(t *testing.T) {
	ctx := context.Background()
	cli := startEtcd(t)
	st := asMirror(t, openStore(t))
	src := gatedDigest{Source: &etcdSource{cli: cli, name: "etcd"}, release: make(chan struct{})}
	levels := make(chan LevelRequest, 1)
	r := &Replayer{Source: src, Target: &storeTarget{st: st, m: Single{}}, Since: 1, Log: testLog(), Levels: levels}
	stop := runReplayer(t, r)
	if _, err := cli.Put(ctx, "/a", "1"); err != nil {
		t.Fatal(err)
	}
	rev, _ := etcdRev(ctx, cli)
	waitRev(t, "store (the comparison still running)", st.Rev, rev, nil)
	reply := make(chan LevelReply, 1)
	levels <- LevelRequest{Rev: rev, Reply: reply}
	select {
	case got := <-reply:
		t.Fatalf("a level served before the start was verified: %+v", got)
	case <-time.After(300 * time.Millisecond):
	}
	close(src.release)
	select {
	case got := <-reply:
		if got.Err != nil || got.Rev < rev {
			t.Fatalf("level: %+v, want revision %d or more and no error", got, rev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no level served after the start was verified")
	}
	if err := stop(); err != nil {
		t.Fatalf("replayer: %v", err)
	}
}

// A start that differs is found by the comparison beside the replay: the
// replay stops as a divergence (fatal) and the pending level is never
// answered as reached.
func TestReplayStopsWhenItsStartIsFoundDifferent(t *testing.T) {
	ctx := context.Background()
	cli, st := differentAtRevision2(t)
	src := gatedDigest{Source: &etcdSource{cli: cli, name: "etcd"}, release: make(chan struct{})}
	levels := make(chan LevelRequest, 1)
	reply := make(chan LevelReply, 1)
	levels <- LevelRequest{Rev: 2, Reply: reply}
	r := &Replayer{Source: src, Target: &storeTarget{st: st, m: Single{}}, Since: 2, Log: testLog(), Levels: levels}
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	time.Sleep(100 * time.Millisecond)
	close(src.release)
	select {
	case err := <-errc:
		if !errors.Is(err, ErrDiverged) || !isFatal(err) {
			t.Fatalf("replay onto a different state: %v, want a divergence", err)
		}
		t.Logf("stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the replay went on from a different state")
	}
	select {
	case got := <-reply:
		t.Fatalf("a level served from a different state: %+v", got)
	default:
	}
}
