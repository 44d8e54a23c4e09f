package storee2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ackWriter writes unique keys through one client until stopped and keeps
// what was acknowledged: the key and the revision of the answer. After
// every acknowledged write it runs check (a read that must see the write).
type ackWriter struct {
	name  string
	cli   *clientv3.Client
	pfx   string
	every time.Duration
	check func(ctx context.Context, key string, rev int64) error

	mu       sync.Mutex
	acks     map[string]int64
	failed   int
	readErrs int
	stale    []string
	lastRev  int64
	back     []string
	ackTimes []time.Time
}

func newAckWriter(name string, cli *clientv3.Client, pfx string, every time.Duration) *ackWriter {
	return &ackWriter{name: name, cli: cli, pfx: pfx, every: every, acks: map[string]int64{}}
}

func (w *ackWriter) run(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			key := fmt.Sprintf("%s%06d", w.pfx, i)
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := w.cli.Put(wctx, key, "v-"+w.name)
			cancel()
			if err != nil {
				w.mu.Lock()
				w.failed++
				w.mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				continue
			}
			w.ack(ctx, key, resp.Header.Revision)
			if w.every > 0 {
				time.Sleep(w.every)
			}
		}
	}()
}

func (w *ackWriter) ack(ctx context.Context, key string, rev int64) {
	w.mu.Lock()
	w.acks[key] = rev
	w.ackTimes = append(w.ackTimes, time.Now())
	if rev <= w.lastRev {
		w.back = append(w.back, fmt.Sprintf("%s at %d after %d", key, rev, w.lastRev))
	}
	w.lastRev = rev
	w.mu.Unlock()
	if w.check == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := w.check(rctx, key, rev)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err == nil:
	case strings.HasPrefix(err.Error(), "stale:"):
		w.stale = append(w.stale, err.Error())
	default:
		w.readErrs++ // the read failed (a member down): never a stale answer
	}
}

// longestGap is the longest time between two acknowledgements in [from, to].
func (w *ackWriter) longestGap(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var gap time.Duration
	prev := from
	for _, at := range w.ackTimes {
		if at.Before(from) {
			continue
		}
		if at.After(to) {
			gap = max(gap, at.Sub(prev))
			return gap
		}
		gap = max(gap, at.Sub(prev))
		prev = at
	}
	return max(gap, to.Sub(prev))
}

// report fails the test for stale reads or revisions going backwards and
// logs the counts.
func (w *ackWriter) report(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("writer %s: %d acknowledged, %d failed (not acknowledged), %d reads failed, %d stale", w.name, len(w.acks), w.failed, w.readErrs, len(w.stale))
	for i, s := range w.stale {
		if i < 5 {
			t.Errorf("writer %s read its acknowledged write stale: %s", w.name, s)
		}
	}
	for i, s := range w.back {
		if i < 5 {
			t.Errorf("writer %s: revision went backwards: %s", w.name, s)
		}
	}
}

// sees is a check: a read through cli (serializable or not) must return key
// at rev or later.
func sees(cli *clientv3.Client, opts ...clientv3.OpOption) func(ctx context.Context, key string, rev int64) error {
	return func(ctx context.Context, key string, rev int64) error {
		resp, err := cli.Get(ctx, key, opts...)
		if err != nil {
			return err
		}
		if len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision < rev {
			return fmt.Errorf("stale: %s acknowledged at %d, read %v at header %d", key, rev, resp.Kvs, resp.Header.Revision)
		}
		return nil
	}
}

// checkAcked fails unless every acknowledged write is in kvs with the
// revision it was acknowledged at.
func checkAcked(t *testing.T, where string, kvs []*mvccpb.KeyValue, writers ...*ackWriter) int {
	t.Helper()
	have := map[string]int64{}
	for _, kv := range kvs {
		have[string(kv.Key)] = kv.ModRevision
	}
	n, bad := 0, 0
	for _, w := range writers {
		w.mu.Lock()
		for k, rev := range w.acks {
			n++
			if have[k] != rev {
				if bad++; bad <= 5 {
					t.Errorf("%s: acknowledged write %s at revision %d: found at %d", where, k, rev, have[k])
				}
			}
		}
		w.mu.Unlock()
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d acknowledged writes lost or changed", where, bad, n)
	}
	return n
}

// revWatcher watches a prefix from a revision and checks that revisions
// never go backwards; it keeps the revision each key was last put at.
type revWatcher struct {
	mu   sync.Mutex
	seen map[string]int64
	last int64
	back []string
	err  error
	done chan struct{}
}

func watchRevs(ctx context.Context, cli *clientv3.Client, prefix string, from int64) *revWatcher {
	w := &revWatcher{seen: map[string]int64{}, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for resp := range cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(from)) {
			if err := resp.Err(); err != nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
				return
			}
			w.mu.Lock()
			for _, ev := range resp.Events {
				rev := ev.Kv.ModRevision
				if rev < w.last {
					w.back = append(w.back, fmt.Sprintf("%s at %d after %d", ev.Kv.Key, rev, w.last))
				}
				w.last = rev
				if ev.Type == clientv3.EventTypePut {
					w.seen[string(ev.Kv.Key)] = rev
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// check fails unless the watcher saw every acknowledged write at its
// revision, with revisions never going backwards.
func (w *revWatcher) check(t *testing.T, until int64, writers ...*ackWriter) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		w.mu.Lock()
		last, err := w.last, w.err
		w.mu.Unlock()
		if last >= until || err != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		t.Errorf("watch ended: %v", w.err)
	}
	for i, b := range w.back {
		if i < 5 {
			t.Errorf("watch: revision went backwards: %s", b)
		}
	}
	missing := []string{}
	for _, wr := range writers {
		wr.mu.Lock()
		for k, rev := range wr.acks {
			if w.seen[k] != rev {
				missing = append(missing, fmt.Sprintf("%s@%d (saw %d)", k, rev, w.seen[k]))
			}
		}
		wr.mu.Unlock()
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("watch missed %d acknowledged writes, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
	t.Logf("watch saw %d keys up to revision %d, none backwards", len(w.seen), w.last)
}
