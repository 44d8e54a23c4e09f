package e2e

import (
	"context"
	"sync"
	"time"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// haSpan is one HA node step as the Installation showed it: from the poll
// that first saw status.ha name it to the poll that saw it no longer named.
type haSpan struct {
	key          string // "install switch/qk2-cp2"
	first, ended time.Time
}

// haTimeline polls the Installation beside follow (every followPoll) and
// records the HA node steps in the order they ran. An action registered
// for a step runs once, in its own goroutine, when that step is first seen
// (so a slow action never delays the record of the next steps); wait
// returns when every started action has ended.
type haTimeline struct {
	c       *cluster
	mu      sync.Mutex
	spans   []haSpan
	actions map[string]func()
	stop    context.CancelFunc
	polling sync.WaitGroup
	acting  sync.WaitGroup
}

// haKey names an HA node step of a direction: "install switch/qk2-cp2".
func haKey(op v1.Operation, step, node string) string { return string(op) + " " + step + "/" + node }

func (c *cluster) startTimeline(actions map[string]func()) *haTimeline {
	ctx, cancel := context.WithCancel(context.Background())
	tl := &haTimeline{c: c, actions: actions, stop: cancel}
	tl.polling.Add(1)
	go tl.run(ctx)
	return tl
}

func (tl *haTimeline) run(ctx context.Context) {
	defer tl.polling.Done()
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	current := ""
	for {
		in := tl.c.installation()
		now := time.Now()
		key := ""
		if in != nil && in.Status.HA != nil && in.Status.HA.Step != "" {
			key = string(in.Status.HA.Op) + " " + in.Status.HA.Step
		}
		if in != nil && key != current {
			tl.mu.Lock()
			if n := len(tl.spans); n > 0 && tl.spans[n-1].ended.IsZero() {
				tl.spans[n-1].ended = now
			}
			if key != "" {
				tl.spans = append(tl.spans, haSpan{key: key, first: now})
			}
			tl.mu.Unlock()
			current = key
			if a := tl.actions[key]; a != nil {
				delete(tl.actions, key)
				tl.acting.Add(1)
				go func() { defer tl.acting.Done(); a() }()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// span is the step's record (the first one of that key), and whether it
// was seen at all; a step still running has ended zero.
func (tl *haTimeline) span(key string) (haSpan, bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, s := range tl.spans {
		if s.key == key {
			return s, true
		}
	}
	return haSpan{}, false
}

// all is every span seen so far.
func (tl *haTimeline) all() []haSpan {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]haSpan(nil), tl.spans...)
}

// Stop ends the polling and waits for the actions it started.
func (tl *haTimeline) Stop() {
	tl.stop()
	tl.polling.Wait()
	tl.acting.Wait()
}
