package storee2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Parameters of TestKillNine. Writers put to their own keys (each written
// once), to a few shared keys (overwritten by everyone), and compare-and-swap
// a key of their own the way kube-apiserver updates objects.
const (
	kill9Writers    = 8
	kill9Cycles     = 5
	kill9SharedKeys = 4
	kill9MinAcks    = 50 // acknowledged writes a cycle needs before the kill may come
	kill9Budget     = 4 * time.Minute
	kill9LargeValue = 16 << 10 // bytes; one write in 16 carries this much more
)

// ack is one acknowledged write: the server answered OK at Rev.
type ack struct {
	Key, Value string
	Rev        int64
	Writer     int
}

// ackLog collects acknowledged writes from all writers.
type ackLog struct {
	mu     sync.Mutex
	acks   []ack
	maxRev int64
}

func (l *ackLog) add(a ack) {
	l.mu.Lock()
	l.acks = append(l.acks, a)
	l.maxRev = max(l.maxRev, a.Rev)
	l.mu.Unlock()
}

// newest is the highest acknowledged revision.
func (l *ackLog) newest() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxRev
}

func (l *ackLog) snapshot() []ack {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ack(nil), l.acks...)
}

func (l *ackLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

// TestKillNine kills the server with SIGKILL at random moments under
// concurrent writes, restarts it on the same data dir with fsync on, and
// checks that nothing acknowledged was lost: every acked write (or a later
// write of its key) is present, the revision never goes backwards, and Range
// (and Watch) at old revisions return exactly what was acked.
func TestKillNine(t *testing.T) { runKillNine(t, false) }

// TestKillNineWhileCompacting is TestKillNine with a compactor that keeps
// compacting to 500 revisions behind the newest acknowledged write, so that
// kills also land during compactions. After each restart the acknowledged
// compactions hold (ErrCompacted below them) and every ack at or above the
// highest compaction attempted reads back exactly.
func TestKillNineWhileCompacting(t *testing.T) { runKillNine(t, true) }

func runKillNine(t *testing.T, compacting bool) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("QK_KILL9_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("QK_KILL9_SEED=%q is not a number; set it to the seed a failed run logged", v)
		}
	}
	start := time.Now()
	s := startServer(t, serverOptions{}) // fsync on: durability is the point
	t.Logf("seed %d (rerun with QK_KILL9_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	log := &ackLog{}
	casRev := make([]int64, kill9Writers) // per writer: mod revision of its CAS key as last seen
	seqs := make([]int, kill9Writers)
	var seen int64 // highest revision any response or check has shown

	// A watcher that lives through every kill: clientv3 resumes it after the
	// last revision it received. What it saw must agree with the final history.
	// (Not with the compactor: a watcher behind a compaction is canceled.)
	wcli := s.Client()
	defer wcli.Close()
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	var rec *watchRecord
	if !compacting {
		rec = recordWatch(wctx, wcli, "kn/")
	}
	leases := grantKill9Leases(t, s)
	comp := &compactor{log: log}

	for cycle := 1; cycle <= kill9Cycles; cycle++ {
		if time.Since(start) > kill9Budget {
			t.Fatalf("cycle %d: over the %v budget", cycle, kill9Budget)
		}
		before := log.len()
		ctx, cancel := context.WithCancel(context.Background())
		cli := s.Client()
		var wg sync.WaitGroup
		for w := 0; w < kill9Writers; w++ {
			wg.Add(1)
			wr := &writer{id: w, cli: cli, log: log, seq: &seqs[w], casRev: &casRev[w],
				rng: rand.New(rand.NewPCG(seed+uint64(cycle*100+w), 1))}
			go func() { defer wg.Done(); wr.run(ctx) }()
		}
		if compacting {
			wg.Add(1)
			go func() { defer wg.Done(); comp.run(ctx, cli) }()
		}

		// Under load: wait for some progress, then kill at a random moment.
		deadline := time.Now().Add(60 * time.Second)
		for log.len()-before < kill9MinAcks {
			if time.Now().After(deadline) {
				cancel()
				wg.Wait()
				t.Fatalf("cycle %d: only %d writes acknowledged in 60s", cycle, log.len()-before)
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		pid := s.PID()
		s.Kill9()
		cancel()
		wg.Wait()
		cli.Close()
		t.Logf("cycle %d: killed pid %d after %d acknowledged writes this cycle", cycle, pid, log.len()-before)

		restart := time.Now()
		s.Start()
		t.Logf("cycle %d: restarted in %v", cycle, time.Since(restart).Round(time.Millisecond))
		acked, attempted := comp.revs()
		seen = verifyAcks(t, s, log.snapshot(), casRev, seen, cycle, acked, attempted)
		leases.verify(t, s, cycle)
	}
	acks := log.snapshot()
	if compacting {
		acked, _ := comp.revs()
		if acked == 0 {
			t.Fatalf("the compactor never had a compaction acknowledged")
		}
		leases.verifyShortExpires(t, s)
		t.Logf("%d acknowledged writes and compactions up to %d survived %d kills in %v; revision %d", len(acks), acked, kill9Cycles, time.Since(start).Round(time.Millisecond), seen)
		return
	}
	history := verifyWatchHistory(t, s, acks)
	verifyRecordedWatch(t, rec, history, acks, seen)
	wcancel()
	leases.verifyShortExpires(t, s)
	verifyCompactionSurvives(t, s, acks)
	t.Logf("%d acknowledged writes survived %d kills in %v; revision %d", len(acks), kill9Cycles, time.Since(start).Round(time.Millisecond), seen)
}

// writer puts in a loop until ctx ends, recording every acknowledged write.
type writer struct {
	id     int
	cli    *clientv3.Client
	log    *ackLog
	seq    *int   // survives cycles: keys stay unique
	casRev *int64 // mod revision of this writer's CAS key as last seen
	rng    *rand.Rand
}

func (w *writer) run(ctx context.Context) {
	for ctx.Err() == nil {
		*w.seq++
		val := fmt.Sprintf("w%d-s%d", w.id, *w.seq)
		if w.rng.IntN(16) == 0 {
			// Some large values, so that the engine flushes and compacts
			// its files while the kills happen.
			val += "-" + strings.Repeat("p", kill9LargeValue)
		}
		var err error
		switch n := w.rng.IntN(10); {
		case n < 6:
			err = w.put(ctx, fmt.Sprintf("kn/own/%d/%08d", w.id, *w.seq), val)
		case n < 8:
			err = w.put(ctx, fmt.Sprintf("kn/shared/%d", w.rng.IntN(kill9SharedKeys)), val)
		default:
			err = w.cas(ctx, val)
		}
		if err != nil {
			time.Sleep(20 * time.Millisecond) // the server is down or restarting
		}
	}
}

func (w *writer) put(ctx context.Context, key, val string) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := w.cli.Put(cctx, key, val)
	if err != nil {
		return err
	}
	w.log.add(ack{Key: key, Value: val, Rev: resp.Header.Revision, Writer: w.id})
	return nil
}

// cas is kube-apiserver's OptimisticPut: If(mod_revision(k)==R) Then(Put) Else(Get).
func (w *writer) cas(ctx context.Context, val string) error {
	key := fmt.Sprintf("kn/cas/%d", w.id)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := w.cli.Txn(cctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", *w.casRev)).
		Then(clientv3.OpPut(key, val)).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return err
	}
	if resp.Succeeded {
		*w.casRev = resp.Header.Revision
		w.log.add(ack{Key: key, Value: val, Rev: resp.Header.Revision, Writer: w.id})
		return nil
	}
	// Someone (an earlier, unacknowledged attempt of ours) changed it: catch up.
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		*w.casRev = 0
	} else {
		*w.casRev = kvs[0].ModRevision
	}
	return nil
}

// verifyAcks checks every acknowledged write against the restarted server and
// returns the current revision.
//
// compacted is the highest acknowledged compaction (reads below it must fail
// with ErrCompacted) and attempted the highest one sent: acks below attempted
// are not read back at their revision, since that compaction may have landed.
func verifyAcks(t *testing.T, s *server, acks []ack, casRev []int64, seen int64, cycle int, compacted, attempted int64) int64 {
	t.Helper()
	cli := s.Client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cur, err := cli.Get(ctx, "kn/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("cycle %d: count kn/ after restart: %v", cycle, err)
	}
	rev := cur.Header.Revision
	var maxAck int64
	byRev := map[int64]ack{}
	latest := map[string]ack{}
	perWriter := make([]int64, kill9Writers)
	for _, a := range acks {
		if o, dup := byRev[a.Rev]; dup {
			t.Fatalf("cycle %d: two acknowledged writes at revision %d: %+v and %+v", cycle, a.Rev, o, a)
		}
		byRev[a.Rev] = a
		maxAck = max(maxAck, a.Rev)
		if a.Rev <= perWriter[a.Writer] {
			// A writer waits for each answer before the next write.
			t.Fatalf("cycle %d: writer %d got revision %d after %d: revisions went backwards", cycle, a.Writer, a.Rev, perWriter[a.Writer])
		}
		perWriter[a.Writer] = a.Rev
		if l, ok := latest[a.Key]; !ok || a.Rev > l.Rev {
			latest[a.Key] = a
		}
	}
	if rev < maxAck || rev < seen {
		t.Fatalf("cycle %d: revision after restart is %d, below an acknowledged write at %d (highest seen before: %d)", cycle, rev, maxAck, seen)
	}

	// The newest acknowledged write of each key is there (or a later write of it).
	if int64(len(latest)) > cur.Count {
		t.Errorf("cycle %d: %d keys acknowledged but only %d under kn/", cycle, len(latest), cur.Count)
	}
	all, err := cli.Get(ctx, "kn/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("cycle %d: list kn/: %v", cycle, err)
	}
	present := map[string]int64{}
	values := map[string]string{}
	for _, kv := range all.Kvs {
		present[string(kv.Key)] = kv.ModRevision
		values[string(kv.Key)] = string(kv.Value)
	}
	for k, a := range latest {
		mod, ok := present[k]
		switch {
		case !ok:
			t.Fatalf("cycle %d: acknowledged key %s (rev %d, %q) is missing after restart", cycle, k, a.Rev, a.Value)
		case mod < a.Rev:
			t.Fatalf("cycle %d: key %s is at mod revision %d, below its acknowledged write at %d", cycle, k, mod, a.Rev)
		case mod == a.Rev && values[k] != a.Value:
			t.Fatalf("cycle %d: key %s at revision %d is %q; acknowledged %q", cycle, k, mod, values[k], a.Value)
		}
	}
	for w, r := range casRev {
		if mod := present[fmt.Sprintf("kn/cas/%d", w)]; mod < r {
			t.Fatalf("cycle %d: CAS key of writer %d at mod revision %d, below the %d it last saw", cycle, w, mod, r)
		}
	}

	// Acknowledged compactions held.
	if compacted > 1 {
		if _, err := cli.Get(ctx, "kn/", clientv3.WithRev(compacted-1)); !errors.Is(err, rpctypes.ErrCompacted) {
			t.Fatalf("cycle %d: get at %d, below the acknowledged compaction at %d: %v; want %v", cycle, compacted-1, compacted, err, rpctypes.ErrCompacted)
		}
	}
	// Range at each acknowledged revision returns exactly the acknowledged write.
	readable := acks
	if attempted > 0 {
		readable = nil
		for _, a := range acks {
			if a.Rev >= attempted {
				readable = append(readable, a)
			}
		}
	}
	if err := rangeAcks(ctx, cli, readable); err != nil {
		t.Fatalf("cycle %d: %v", cycle, err)
	}
	t.Logf("cycle %d: %d acknowledged writes on %d keys verified at revision %d (%d read back at their revision; compacted at %d)", cycle, len(acks), len(latest), rev, len(readable), compacted)
	return rev
}

// rangeAcks reads every ack's key at the ack's revision (8 readers in
// parallel) and returns the first mismatch.
func rangeAcks(ctx context.Context, cli *clientv3.Client, acks []ack) error {
	jobs := make(chan ack)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range jobs {
				resp, err := cli.Get(ctx, a.Key, clientv3.WithRev(a.Rev))
				switch {
				case err != nil:
					err = fmt.Errorf("get %s at revision %d: %w", a.Key, a.Rev, err)
				case len(resp.Kvs) != 1:
					err = fmt.Errorf("get %s at its acknowledged revision %d: %d keys", a.Key, a.Rev, len(resp.Kvs))
				case resp.Kvs[0].ModRevision != a.Rev || string(resp.Kvs[0].Value) != a.Value:
					err = fmt.Errorf("get %s at revision %d: %q at mod revision %d; acknowledged %q", a.Key, a.Rev, resp.Kvs[0].Value, resp.Kvs[0].ModRevision, a.Value)
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	var first error
feed:
	for _, a := range acks {
		select {
		case jobs <- a:
		case first = <-errs:
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if first != nil {
		return first
	}
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// verifyWatchHistory watches kn/ from revision 1 and checks that every
// acknowledged write appears as an event at its revision, in revision order.
func verifyWatchHistory(t *testing.T, s *server, acks []ack) map[int64]string {
	t.Helper()
	cli := s.Client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The watch ends at the newest write under kn/, not at the store's
	// revision: a later revision may be outside the prefix (the short
	// lease's key expiring, which a leader change in cluster mode delays).
	cur, err := cli.Get(ctx, "kn/", clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil {
		t.Fatalf("watch history: get current revision: %v", err)
	}
	target := cur.Header.Revision
	if len(cur.Kvs) == 1 {
		target = cur.Kvs[0].ModRevision
	}
	wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer wcancel()
	events := map[int64]string{}
	var last int64
	for resp := range cli.Watch(wctx, "kn/", clientv3.WithPrefix(), clientv3.WithRev(1)) {
		if err := resp.Err(); err != nil {
			t.Fatalf("watch kn/ from revision 1: %v", err)
		}
		for _, e := range resp.Events {
			if e.Kv.ModRevision < last {
				t.Fatalf("watch history: event at revision %d after %d", e.Kv.ModRevision, last)
			}
			last = e.Kv.ModRevision
			events[e.Kv.ModRevision] = string(e.Kv.Key) + "=" + string(e.Kv.Value)
		}
		if last >= target {
			break
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("watch history: stopped at revision %d of %d: %v", last, target, ctx.Err())
	}
	for _, a := range acks {
		if got, want := events[a.Rev], a.Key+"="+a.Value; got != want {
			t.Fatalf("watch history: event at revision %d is %q; acknowledged %q", a.Rev, got, want)
		}
	}
	t.Logf("watch history: %d events up to revision %d cover all %d acknowledged writes", len(events), last, len(acks))
	return events
}
