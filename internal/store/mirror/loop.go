package mirror

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

// loop is Run's state: the leader's replay and the holds already handled.
type loop struct {
	c         *Controller
	run       *replayRun
	notBefore time.Time
	// alive renews an etcd target's leases for every run of the replay
	// keyed aliveKey (one mode on this leader); nil when none replays.
	alive    *keepAlives
	aliveKey string
	lastErr  string
	holds    map[string]bool
}

type replayRun struct {
	key    string
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// replayBackoff is how long a replay that stopped on a retryable error
// waits before it runs again (an etcd target that is still starting is
// reached within it, before its leases could expire).
const replayBackoff = 250 * time.Millisecond

func (l *loop) replayDone() <-chan struct{} {
	if l.run == nil {
		return nil
	}
	return l.run.done
}

// close stops the replay and the lease renewals.
func (l *loop) close() {
	l.stopReplay()
	l.stopRenewals()
}

// stopRenewals ends the lease renewals of the replay that ran last.
func (l *loop) stopRenewals() {
	if l.alive != nil {
		l.alive.close()
		l.alive, l.aliveKey = nil, ""
	}
}

func (l *loop) stopReplay() {
	if l.run != nil {
		l.run.cancel()
		<-l.run.done
		l.run = nil
	}
}

// reconcileReplay runs the replay while this member leads a mode that
// replays, and restarts it after a retryable error.
func (l *loop) reconcileReplay(ctx context.Context, st *memberState, lead bool) {
	key := ""
	if lead && st.rec.replays() {
		key = fmt.Sprint(st.rec.Mode, " ", peerKey(*st.rec.Peer), " ", st.rec.Since)
	}
	if l.run != nil {
		select {
		case <-l.run.done:
			l.finished(ctx, l.run)
			l.run = nil
		default:
		}
	}
	if l.run != nil && l.run.key != key {
		l.stopReplay()
	}
	if l.aliveKey != key {
		l.stopRenewals()
	}
	if key != "" && l.run == nil && time.Now().After(l.notBefore) {
		l.run = l.startReplay(ctx, st, key)
	}
}

// renewer returns the lease renewals of the replay keyed key, started on
// cli at the first run.
func (l *loop) renewer(key string, cli *clientv3.Client) *keepAlives {
	if l.alive == nil {
		l.alive, l.aliveKey = newKeepAlives(cli), key
	}
	return l.alive
}

func (l *loop) finished(ctx context.Context, run *replayRun) {
	err := run.err
	if err == nil || ctx.Err() != nil {
		return
	}
	l.c.progress.SetErr(err)
	if isFatal(err) {
		l.c.log.Error("mirror: the replay stopped for good", "err", err)
		go l.c.fail(ctx, err)
		return
	}
	if msg := err.Error(); msg != l.lastErr {
		l.c.log.Warn("mirror: the replay stopped; restarting it", "err", err)
		l.lastErr = msg
	}
	l.notBefore = time.Now().Add(replayBackoff)
}

func (l *loop) startReplay(ctx context.Context, st *memberState, key string) *replayRun {
	rctx, cancel := context.WithCancel(ctx)
	run := &replayRun{key: key, cancel: cancel, done: make(chan struct{})}
	src, dst, err := l.c.ends(st.rec, func(cli *clientv3.Client) *keepAlives { return l.renewer(key, cli) })
	if err != nil {
		run.err = err
		close(run.done)
		return run
	}
	r := &Replayer{Source: src, Target: dst, Since: st.rec.Since, Log: l.c.log, Levels: l.c.levels, Progress: &l.c.progress}
	go func() {
		defer close(run.done)
		defer dst.Close()
		run.err = r.Run(rctx)
	}()
	return run
}

// ends returns the replay's source and target for a mode; an etcd target
// renews its leases with renewer's.
func (c *Controller) ends(rec record, renewer func(*clientv3.Client) *keepAlives) (Source, Target, error) {
	switch rec.Mode {
	case api.Mirror:
		cli, err := c.client(*rec.Peer, "source")
		if err != nil {
			return nil, nil, err
		}
		return &etcdSource{cli: cli, name: fmt.Sprintf("the source %v", rec.Peer.Endpoints)}, &storeTarget{st: c.st, m: c.m}, nil
	case api.ReplayingTo:
		cli, err := c.client(*rec.Peer, "target")
		if err != nil {
			return nil, nil, err
		}
		return &storeSource{st: c.st}, newEtcdTarget(cli, fmt.Sprintf("the target %v", rec.Peer.Endpoints), renewer(cli)), nil
	}
	return nil, nil, fmt.Errorf("mode %s replays nothing", rec.Mode)
}

// reconcileHold reports this member's drain of a new hold and, on the
// leader that applied it, runs the transition; a leader that did not apply
// it as leader abandons it (the one that did is gone).
func (l *loop) reconcileHold(ctx context.Context, st *memberState, lead bool) {
	h := st.rec.Hold
	if h == nil {
		return
	}
	if !l.holds["drain "+h.ID] {
		l.holds["drain "+h.ID] = true
		go l.c.reportDrained(ctx, st)
	}
	if lead && !l.holds["run "+h.ID] {
		l.holds["run "+h.ID] = true
		if st.whileLeader {
			go l.c.runTransition(ctx, st)
		} else {
			go l.c.abandon(ctx, st, fmt.Sprintf("%s abandoned: the leader changed while writes were held", h.Op))
		}
	}
}
