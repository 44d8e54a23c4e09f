package storee2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Parameters of TestWatchConsistency.
const (
	wcWriters  = 4
	wcKeys     = 40 // per writer, overwritten and sometimes deleted
	wcWatchers = 48
	wcDuration = 3 * time.Second
)

// wcEvent is one event as a comparable string: type, revision, key, value,
// and the prev_kv value when the watcher asked for it.
type wcEvent string

func eventString(e *clientv3.Event, withPrev bool) wcEvent {
	s := fmt.Sprintf("%s@%d %s=%q", e.Type, e.Kv.ModRevision, e.Kv.Key, e.Kv.Value)
	if withPrev {
		if e.PrevKv != nil {
			s += fmt.Sprintf(" prev=%q@%d", e.PrevKv.Value, e.PrevKv.ModRevision)
		} else {
			s += " prev=none"
		}
	}
	return wcEvent(s)
}

// wcWatcher is one watch started while writes go on.
type wcWatcher struct {
	prefix   string
	fromRev  int64 // 0: from "now", known from the created response
	prevKV   bool
	startRev int64 // first revision the watch covers
	mu       sync.Mutex
	events   []wcEvent
	lastRev  int64
	final    int64 // when set: events after it are not recorded
	err      error
}

// TestWatchConsistency starts watchers while writers put and delete: from
// past revisions (catching up from history while new events arrive) and
// from now, on the whole prefix or one writer's keys, some with prev_kv. Each
// watcher must see exactly the history filtered to its keys and revisions —
// no event lost or repeated at the handoff from history to live events.
func TestWatchConsistency(t *testing.T) {
	s := startServer(t, serverOptions{NoFsync: true})
	cli := s.Client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))

	wctx, stopWrites := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := 0; w < wcWriters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; wctx.Err() == nil; i++ {
				key := fmt.Sprintf("wc/%d/%02d", w, r.IntN(wcKeys))
				var err error
				if r.IntN(8) == 0 {
					_, err = cli.Delete(wctx, key)
				} else {
					_, err = cli.Put(wctx, key, fmt.Sprintf("w%d-%d", w, i))
				}
				if err != nil && wctx.Err() == nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		}()
	}

	// Start watchers while the writes go on.
	watchCtx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	var watchers []*wcWatcher
	interval := wcDuration / wcWatchers
	for i := 0; i < wcWatchers; i++ {
		time.Sleep(interval)
		cur, err := cli.Get(ctx, "wc/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatalf("get current revision: %v", err)
		}
		w := &wcWatcher{prefix: "wc/", prevKV: rng.IntN(2) == 0}
		if rng.IntN(3) > 0 {
			w.prefix = fmt.Sprintf("wc/%d/", rng.IntN(wcWriters))
		}
		if rng.IntN(4) > 0 { // mostly from the past: exercises catch-up
			w.fromRev = 1 + rng.Int64N(cur.Header.Revision)
		}
		w.start(watchCtx, t, s)
		watchers = append(watchers, w)
	}
	stopWrites()
	wg.Wait()
	if t.Failed() {
		return
	}

	// The history, from a watch from revision 1 with prev_kv.
	// A sentinel write marks the end. A write whose context was canceled may
	// still land later; events after the sentinel are ignored everywhere.
	end, err := cli.Put(ctx, "wc/end", "end")
	if err != nil {
		t.Fatalf("put the sentinel: %v", err)
	}
	final := end.Header.Revision
	var history []*clientv3.Event
	hctx, hcancel := context.WithCancel(ctx)
	for resp := range cli.Watch(hctx, "wc/", clientv3.WithPrefix(), clientv3.WithRev(1), clientv3.WithPrevKV()) {
		if err := resp.Err(); err != nil {
			t.Fatalf("history watch: %v", err)
		}
		for _, e := range resp.Events {
			if e.Kv.ModRevision <= final {
				history = append(history, e)
			}
		}
		if len(history) > 0 && history[len(history)-1].Kv.ModRevision >= final {
			break
		}
	}
	hcancel()
	t.Logf("history: %d events up to revision %d", len(history), final)
	// Every write here is one put or one delete: one event per revision, from 2 on.
	for i, e := range history {
		if i > 0 && e.Kv.ModRevision <= history[i-1].Kv.ModRevision {
			t.Errorf("history: event %s after %s: revisions must grow by one event each", eventString(e, true), eventString(history[i-1], true))
		}
	}
	if len(history) > 0 && history[0].Kv.ModRevision < 2 {
		t.Errorf("history: first event %s; an empty store is at revision 1, so the first write is at 2", eventString(history[0], true))
	}
	if t.Failed() {
		t.FailNow()
	}

	for _, w := range watchers {
		w.mu.Lock()
		w.final = final
		var kept []wcEvent // drop what arrived after the sentinel before final was set
		for _, e := range w.events {
			var rev int64
			fmt.Sscanf(string(e)[strings.Index(string(e), "@")+1:], "%d", &rev)
			if rev <= final {
				kept = append(kept, e)
			}
		}
		w.events = kept
		w.mu.Unlock()
	}
	for i, w := range watchers {
		want := w.expected(history)
		got := w.wait(t, final, len(want))
		if len(got) != len(want) {
			t.Fatalf("watcher %d (%s from %d, prev_kv %v): %d events, want %d; first difference: %s", i, w.prefix, w.startRev, w.prevKV, len(got), len(want), firstDiff(got, want))
		}
		for j := range want {
			if got[j] != want[j] {
				t.Fatalf("watcher %d (%s from %d, prev_kv %v): event %d is %s, want %s", i, w.prefix, w.startRev, w.prevKV, j, got[j], want[j])
			}
		}
	}
	t.Logf("%d watchers each saw exactly their part of the history", len(watchers))
}

// start opens the watch and records its events in the background.
func (w *wcWatcher) start(ctx context.Context, t *testing.T, s *server) {
	cli := s.Client()
	context.AfterFunc(ctx, func() { cli.Close() })
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCreatedNotify()}
	if w.fromRev > 0 {
		opts = append(opts, clientv3.WithRev(w.fromRev))
	}
	if w.prevKV {
		opts = append(opts, clientv3.WithPrevKV())
	}
	ch := cli.Watch(ctx, w.prefix, opts...)
	first, ok := <-ch
	if !ok || !first.Created {
		t.Fatalf("watch %s from %d: no created response (%+v)", w.prefix, w.fromRev, first)
	}
	w.startRev = w.fromRev
	if w.fromRev == 0 {
		w.startRev = first.Header.Revision + 1
	}
	go func() {
		for resp := range ch {
			w.mu.Lock()
			if err := resp.Err(); err != nil && ctx.Err() == nil {
				w.err = err
			}
			for _, e := range resp.Events {
				if w.final == 0 || e.Kv.ModRevision <= w.final {
					w.events = append(w.events, eventString(e, w.prevKV))
				}
				w.lastRev = e.Kv.ModRevision
			}
			w.mu.Unlock()
		}
	}()
}

// expected filters the history to this watcher's keys and revisions.
func (w *wcWatcher) expected(history []*clientv3.Event) []wcEvent {
	var out []wcEvent
	for _, e := range history {
		if e.Kv.ModRevision >= w.startRev && strings.HasPrefix(string(e.Kv.Key), w.prefix) {
			out = append(out, eventString(e, w.prevKV))
		}
	}
	return out
}

// wait returns the events once the watcher has n of them (or 30 s passed).
func (w *wcWatcher) wait(t *testing.T, final int64, n int) []wcEvent {
	deadline := time.Now().Add(30 * time.Second)
	for {
		w.mu.Lock()
		evs, err := append([]wcEvent(nil), w.events...), w.err
		w.mu.Unlock()
		if err != nil {
			t.Fatalf("watch %s from %d: %v", w.prefix, w.startRev, err)
		}
		if len(evs) >= n || time.Now().After(deadline) {
			// A moment more, in case events beyond the history arrive (they must not).
			time.Sleep(50 * time.Millisecond)
			w.mu.Lock()
			evs = append([]wcEvent(nil), w.events...)
			w.mu.Unlock()
			return evs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// firstDiff describes where two event lists part.
func firstDiff(got, want []wcEvent) string {
	for i := 0; i < max(len(got), len(want)); i++ {
		var g, w wcEvent = "(none)", "(none)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("at %d got %s, want %s", i, g, w)
		}
	}
	return "none"
}
