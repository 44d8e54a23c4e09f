package storee2e

import (
	"context"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// watchRecord is what one long-lived watch received. Invariant: events are
// appended in the order the client delivered them.
type watchRecord struct {
	mu     sync.Mutex
	events []recEvent
	errs   []string
}

type recEvent struct {
	Rev int64
	KV  string // key=value
}

// recordWatch watches prefix from revision 1 until ctx ends. The client
// reconnects and resumes by itself when the server restarts.
func recordWatch(ctx context.Context, cli *clientv3.Client, prefix string) *watchRecord {
	r := &watchRecord{}
	go func() {
		for resp := range cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(1)) {
			r.mu.Lock()
			if err := resp.Err(); err != nil && ctx.Err() == nil {
				r.errs = append(r.errs, err.Error())
			}
			for _, e := range resp.Events {
				r.events = append(r.events, recEvent{Rev: e.Kv.ModRevision, KV: string(e.Kv.Key) + "=" + string(e.Kv.Value)})
			}
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *watchRecord) snapshot() ([]recEvent, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recEvent(nil), r.events...), append([]string(nil), r.errs...)
}

// verifyRecordedWatch waits until the watch that lived through the kills has
// caught up, then checks it saw exactly the final history: every revision once,
// in order, with the same key and value (an event delivered before it was
// durable, then lost by a crash, would show up here as a mismatch).
func verifyRecordedWatch(t *testing.T, r *watchRecord, history map[int64]string, acks []ack, cur int64) {
	t.Helper()
	var last int64
	for rev := range history {
		last = max(last, rev)
	}
	deadline := time.Now().Add(60 * time.Second)
	var evs []recEvent
	var errs []string
	for {
		evs, errs = r.snapshot()
		if len(errs) > 0 {
			t.Fatalf("watch across kills: errors %v", errs)
		}
		if len(evs) > 0 && evs[len(evs)-1].Rev >= last {
			break
		}
		if time.Now().After(deadline) {
			got := int64(0)
			if len(evs) > 0 {
				got = evs[len(evs)-1].Rev
			}
			t.Fatalf("watch across kills: reached revision %d of %d in 60s after the last restart", got, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var prev int64
	for _, e := range evs {
		if e.Rev <= prev {
			t.Fatalf("watch across kills: event at revision %d after %d (duplicate or out of order)", e.Rev, prev)
		}
		prev = e.Rev
		if want, ok := history[e.Rev]; !ok || want != e.KV {
			t.Fatalf("watch across kills: saw %q at revision %d, but the history after the kills has %q there", e.KV, e.Rev, want)
		}
	}
	if len(evs) != len(history) {
		t.Fatalf("watch across kills: %d events, history has %d: events were lost", len(evs), len(history))
	}
	t.Logf("watch across kills: %d events, each once and in order, match the history (current revision %d)", len(evs), cur)
}
