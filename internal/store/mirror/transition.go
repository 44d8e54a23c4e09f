package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// drainedNotice tells, through the log, that a member has no admitted write
// left in flight under a hold: every write it admitted before is ordered
// before the notice.
type drainedNotice struct {
	Hold   string `json:"hold"`
	Member uint64 `json:"member"`
}

func decodeNotice(b []byte) (drainedNotice, bool) {
	var n drainedNotice
	return n, json.Unmarshal(b, &n) == nil && n.Hold != ""
}

// reportDrained waits until this member's admitted writes are answered
// (new ones wait for the hold's end), then says so through the log.
// Both waits end early when the hold's deadline passes, the state changes
// (the hold ended) or ctx ends.
func (c *Controller) reportDrained(ctx context.Context, st *memberState) {
	h := st.rec.Hold
	deadline := st.appliedAt.Add(h.Timeout)
	over := func() bool { return !time.Now().Before(deadline) || c.state.Load() != st }
	_ = wait.PollUntilContextTimeout(ctx, time.Millisecond, time.Until(deadline), true, func(context.Context) (bool, error) {
		return c.inflight.Load() == 0 || over(), nil
	})
	n, _ := json.Marshal(drainedNotice{Hold: h.ID, Member: c.m.ID()})
	_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Until(deadline), true, func(context.Context) (bool, error) {
		if over() || ctx.Err() != nil {
			return true, nil
		}
		nctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return c.st.Notify(nctx, n) == nil, nil
	})
}

// drainWait bounds the wait for the members' drain notices.
const drainWait = 250 * time.Millisecond

// waitDrained waits for every voting member's drain notice, or drainWait.
// The drains spare the switch a retry and the writes in flight an error;
// they are not what makes it correct: the switch applies only at the
// revision the replay levelled at, so a write that lands after that moves
// the revision and the leader levels again, and a forwarded write that
// reaches the source after the switch is answered with an error, never
// acknowledged. A member that is down, or one with a proposal stuck on a
// dead leader (up to raft's request timeout), does not hold the switch.
func (c *Controller) waitDrained(ctx context.Context, st *memberState) {
	h := st.rec.Hold
	voters := c.voters()
	got := map[uint64]bool{}
	timer := time.NewTimer(min(drainWait, h.Timeout/4))
	defer timer.Stop()
	for len(got) < len(voters) {
		select {
		case n := <-c.notices:
			if n.Hold == h.ID && voters[n.Member] {
				got[n.Member] = true
			}
		case <-timer.C:
			c.log.Warn("mirror: members did not report their drain in time; going on", "hold", h.ID, "reported", len(got), "voters", len(voters))
			return
		case <-ctx.Done():
			return
		}
	}
}

// voters are the ids of the voting members (this member alone for a
// single store).
func (c *Controller) voters() map[uint64]bool {
	out := map[uint64]bool{}
	ms, err := c.st.Members()
	if err == nil {
		for _, m := range ms {
			if !m.IsLearner {
				out[m.ID] = true
			}
		}
	}
	if len(out) == 0 {
		out[c.m.ID()] = true
	}
	return out
}

// runTransition runs a hold's transition on the leader; past the hold's
// timeout it is abandoned.
func (c *Controller) runTransition(ctx context.Context, st *memberState) {
	h := st.rec.Hold
	tctx, cancel := context.WithDeadline(ctx, st.appliedAt.Add(h.Timeout))
	defer cancel()
	c.waitDrained(tctx, st)
	var err error
	switch h.Op {
	case opCutover:
		err = c.cutover(tctx, st)
	case opCutback:
		err = c.cutback(tctx, st)
	default:
		err = fmt.Errorf("unknown transition %q", h.Op)
	}
	if err != nil && !errors.Is(err, mvcc.ErrModeConflict) {
		c.log.Warn("mirror: abandoning the transition", "op", h.Op, "err", err)
		c.abandon(ctx, st, fmt.Sprintf("%s abandoned: %v", h.Op, err))
	}
}

// cutover makes a mirror the owner: the source's revision E is read (no
// write reaches the source any more: the members hold theirs and no API
// server uses it), the replay reaches E with the source's leases, and the
// switch applies only if the store is at E.
func (c *Controller) cutover(ctx context.Context, st *memberState) error {
	cli, err := c.client(*st.rec.Peer, "source")
	if err != nil {
		return err
	}
	for {
		e, err := etcdRev(ctx, cli)
		if err != nil {
			return fmt.Errorf("read the source's revision: %w", err)
		}
		if err := c.switchAt(ctx, st, e, record{Mode: api.Owner, Since: e}, true); !errors.Is(err, errLevelAgain) {
			return err
		}
	}
}

// cutback makes an owner that replays onto etcd a mirror of it: the replay
// drains to the store's revision S (nothing writes the store now: writes
// and lease expiry are held), and the switch applies only if the store is
// still at S.
func (c *Controller) cutback(ctx context.Context, st *memberState) error {
	for {
		s := c.st.Rev()
		if err := c.switchAt(ctx, st, s, record{Mode: api.Mirror, Peer: st.rec.Peer, Since: s}, false); !errors.Is(err, errLevelAgain) {
			return err
		}
	}
}

var errLevelAgain = errors.New("the revision moved; level again")

// switchAt brings the replay level at rev and switches to next there.
func (c *Controller) switchAt(ctx context.Context, st *memberState, rev int64, next record, renew bool) error {
	if c.beforeSwitch != nil {
		c.beforeSwitch()
	}
	got, err := c.level(ctx, rev)
	if err != nil {
		return err
	}
	if got != rev {
		return errLevelAgain
	}
	next.LastPause = &api.Pause{Op: st.rec.Hold.Op, Duration: time.Since(st.appliedAt), Revision: rev, At: time.Now().UTC()}
	mc := next.change(st.epoch, rev)
	mc.RenewLeases = renew
	err = c.st.ChangeMode(ctx, mc)
	if errors.Is(err, mvcc.ErrRevisionMoved) {
		return errLevelAgain
	}
	return err
}

// level asks the running replay to reach rev with leases in sync.
func (c *Controller) level(ctx context.Context, rev int64) (int64, error) {
	if ctx.Err() != nil {
		return 0, fmt.Errorf("the hold's timeout passed before the replay reached revision %d: %w", rev, ctx.Err())
	}
	reply := make(chan LevelReply, 1)
	select {
	case c.levels <- LevelRequest{Rev: rev, Reply: reply}:
	case <-ctx.Done():
		why := "it is not running on the leader"
		if c.progress.Running.Load() {
			// it runs but is inside one revision's apply the whole time: a
			// slow target (each revision is one write there)
			why = fmt.Sprintf("it was applying revisions onto the target the whole time (at %d): the target writes slowly", c.progress.TargetRevision.Load())
		}
		if e := c.progress.LastErr(); e != "" {
			why += " (" + e + ")"
		}
		return 0, fmt.Errorf("the replay did not take the request to reach revision %d: %s: %w", rev, why, ctx.Err())
	}
	select {
	case r := <-reply:
		return r.Rev, r.Err
	case <-ctx.Done():
		return 0, fmt.Errorf("the replay did not reach revision %d in time: %w", rev, ctx.Err())
	}
}

// abandon ends a hold with the mode as it was; held writes go on.
func (c *Controller) abandon(ctx context.Context, st *memberState, reason string) {
	next := st.rec
	next.Hold, next.LastAbort = nil, reason
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := c.st.ChangeMode(actx, next.change(st.epoch, 0))
	if err != nil && !errors.Is(err, mvcc.ErrModeConflict) {
		c.log.Error("mirror: could not abandon the transition; a new leader will", "err", err)
	}
}

// fail records that the replay stopped for good (a hold in progress ends).
func (c *Controller) fail(ctx context.Context, cause error) {
	for attempt := 0; attempt < 50 && ctx.Err() == nil; attempt++ {
		st := c.state.Load()
		if !st.rec.replays() {
			return
		}
		next := st.rec
		next.Failed = cause.Error()
		if next.Hold != nil {
			next.Hold, next.LastAbort = nil, next.Hold.Op+" abandoned: the replay failed"
		}
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.st.ChangeMode(fctx, next.change(st.epoch, 0))
		cancel()
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
