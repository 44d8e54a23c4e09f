package storee2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"
)

// snapshotLoadKeys is the keyspace TestSnapshotWhileWriting snapshots;
// QK_SNAPSHOT_LOAD_KEYS overrides it (to measure a larger one by hand).
var snapshotLoadKeys = 200_000

func init() {
	if n, err := strconv.Atoi(os.Getenv("QK_SNAPSHOT_LOAD_KEYS")); err == nil && n > 0 {
		snapshotLoadKeys = n
	}
}

// TestSnapshotWhileWriting measures what a snapshot of a large keyspace,
// compacted as kube-apiserver keeps it, costs the server under test
// (QK_STORE_CMD: the store, or etcd for comparison) while writers run: the
// put latencies writers see before and
// during `etcdctl snapshot save` (p50, p99, max, and the longest stretch in
// which no put completed), and the growth of the server's resident memory.
// It logs the numbers and asserts none (the machine is shared). On the store
// it also checks that a snapshot whose client goes away mid-stream leaves no
// temporary file behind.
func TestSnapshotWhileWriting(t *testing.T) {
	s := startServer(t, serverOptions{})
	c := s.Client()
	defer c.Close()
	loadStart := time.Now()
	loadKeys(t, c, snapshotLoadKeys)
	t.Logf("loaded %d keys of ~250 B into %s in %v", snapshotLoadKeys, s.Kind, time.Since(loadStart).Round(time.Millisecond))
	compactAll(t, c)

	ctx, stop := context.WithCancel(context.Background())
	mem := startRSSSampler(ctx, s.PID())
	lat := startLatencyWriters(ctx, c, 4)
	time.Sleep(3 * time.Second) // the baseline window: writers alone
	mem.peak()
	baseRSS := mem.current()
	snapStart := time.Now()
	file := snapshotSave(t, s)
	snapEnd := time.Now()
	duringRSS := mem.peak()
	stop()
	lat.wait()
	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	before, during := lat.split(snapStart, snapEnd)
	t.Logf("%s snapshot of %d keys: %d MiB in %v", s.Kind, snapshotLoadKeys, info.Size()>>20, snapEnd.Sub(snapStart).Round(time.Millisecond))
	t.Logf("puts before the snapshot: %s", before)
	t.Logf("puts during the snapshot: %s", during)
	t.Logf("server RSS: %s when the snapshot started, peak %s during it (growth %+d MiB; anon %+d MiB, file-backed %+d MiB)",
		baseRSS, duringRSS, (duringRSS.rss-baseRSS.rss)>>10, (duringRSS.anon-baseRSS.anon)>>10, (duringRSS.file-baseRSS.file)>>10)
	if s.Kind == "store" {
		checkCanceledSnapshotCleansUp(t, s)
		checkSigtermDuringSnapshot(t, s)
		checkKill9DuringSnapshot(t, s)
	}
}

// loadKeys puts n keys in txns of 100.
func loadKeys(t *testing.T, c *clientv3.Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	val := strings.Repeat("v", 230)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w * 100; i < n; i += 400 {
				ops := make([]clientv3.Op, 0, 100)
				for j := i; j < min(i+100, n); j++ {
					ops = append(ops, clientv3.OpPut(fmt.Sprintf("/load/%07d", j), val))
				}
				if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("load: %v", err)
	}
}

// compactAll compacts at the current revision, as kube-apiserver's
// compactor keeps most of the keyspace below the compacted revision.
func compactAll(t *testing.T, c *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := c.Get(ctx, "/load/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("count: %v", err)
	}
	if _, err := c.Compact(ctx, r.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compact at %d: %v", r.Header.Revision, err)
	}
}

// latencies records every put's start and duration.
type latencies struct {
	mu   sync.Mutex
	puts []putTiming
	wg   sync.WaitGroup
}

type putTiming struct {
	start time.Time
	took  time.Duration
}

func startLatencyWriters(ctx context.Context, c *clientv3.Client, n int) *latencies {
	l := &latencies{}
	for w := 0; w < n; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				start := time.Now()
				_, err := c.Put(ctx, fmt.Sprintf("/load/%07d", (w*7919+i*31)%snapshotLoadKeys), strconv.Itoa(i))
				if err != nil {
					continue // the context ended
				}
				l.mu.Lock()
				l.puts = append(l.puts, putTiming{start, time.Since(start)})
				l.mu.Unlock()
			}
		}()
	}
	return l
}

func (l *latencies) wait() { l.wg.Wait() }

// split summarises the puts that started before from, and those that
// started in [from, to].
func (l *latencies) split(from, to time.Time) (before, during latencySummary) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b, d []putTiming
	for _, p := range l.puts {
		switch {
		case p.start.Before(from):
			b = append(b, p)
		case !p.start.After(to):
			d = append(d, p)
		}
	}
	return summarise(b), summarise(d)
}

type latencySummary struct {
	n                  int
	p50, p99, max, gap time.Duration
}

func (s latencySummary) String() string {
	return fmt.Sprintf("%d puts, p50 %v, p99 %v, max %v, longest stretch without a completed put %v",
		s.n, s.p50.Round(time.Microsecond), s.p99.Round(time.Microsecond), s.max.Round(time.Microsecond), s.gap.Round(time.Microsecond))
}

func summarise(ps []putTiming) latencySummary {
	if len(ps) == 0 {
		return latencySummary{}
	}
	took := make([]time.Duration, len(ps))
	ends := make([]time.Time, len(ps))
	for i, p := range ps {
		took[i], ends[i] = p.took, p.start.Add(p.took)
	}
	slices.Sort(took)
	slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	var gap time.Duration
	for i := 1; i < len(ends); i++ {
		gap = max(gap, ends[i].Sub(ends[i-1]))
	}
	return latencySummary{n: len(ps), p50: took[len(took)/2], p99: took[len(took)*99/100], max: took[len(took)-1], gap: gap}
}

// rssSampler reads a process's resident memory every 20 ms and keeps the
// latest reading and the highest one since the last peak().
type rssSampler struct {
	mu        sync.Mutex
	max, last rss
}

// rss is resident memory in KiB: total, anonymous, file-backed.
type rss struct{ rss, anon, file int64 }

func (r rss) String() string { return fmt.Sprintf("%d MiB", r.rss>>10) }

func startRSSSampler(ctx context.Context, pid int) *rssSampler {
	s := &rssSampler{}
	go func() {
		_ = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
			if r, ok := readRSS(pid); ok {
				s.mu.Lock()
				s.last = r
				if r.rss > s.max.rss {
					s.max = r
				}
				s.mu.Unlock()
			}
			return false, nil
		})
	}()
	return s
}

// peak returns the highest reading since the previous call and starts anew.
func (s *rssSampler) peak() rss {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.max
	s.max = rss{}
	return p
}

// current returns the latest reading.
func (s *rssSampler) current() rss {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func readRSS(pid int) (rss, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return rss{}, false
	}
	defer f.Close()
	var r rss
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			r.rss = v
		case "RssAnon:":
			r.anon = v
		case "RssFile:":
			r.file = v
		}
	}
	return r, r.rss > 0
}

// snapshotTemps lists the store's temporary snapshot directories beside
// its data dir.
func snapshotTemps(s *server) []string {
	m, _ := filepath.Glob(filepath.Join(filepath.Dir(s.DataDir), "."+filepath.Base(s.DataDir)+".snapshot-*"))
	return m
}

// startSnapshotSave starts `etcdctl snapshot save` in the background and
// waits until the stream has begun (the store's temporary file exists and
// etcdctl has received bytes).
func startSnapshotSave(t *testing.T, s *server) *bgProc {
	t.Helper()
	part := filepath.Join(t.TempDir(), "snapshot.db")
	p := startBg(t, "etcdctl-snapshot", filepath.Join(t.TempDir(), "etcdctl.log"), etcdctlBin(t),
		"--endpoints", s.ClientURL, "--cacert", s.PKI.CAFile, "--cert", s.ClientPair.Cert, "--key", s.ClientPair.Key,
		"snapshot", "save", part)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var seen []string
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		if st, err := os.Stat(part + ".part"); err == nil && st.Size() > 0 {
			seen = snapshotTemps(s)
			return true, nil
		}
		return p.Exited(), nil
	})
	if err != nil || len(seen) == 0 {
		t.Fatalf("no snapshot stream with a temporary file beside the data dir began (err %v, etcdctl exited %v, temporary files %q)", err, p.Exited(), seen)
	}
	return p
}

// checkCanceledSnapshotCleansUp kills etcdctl mid-stream and waits for the
// store to remove the temporary file.
func checkCanceledSnapshotCleansUp(t *testing.T, s *server) {
	t.Helper()
	p := startSnapshotSave(t, s)
	p.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return len(snapshotTemps(s)) == 0, nil
	})
	if err != nil {
		t.Fatalf("the store kept %q after the client went away", snapshotTemps(s))
	}
	t.Logf("a snapshot whose client was killed mid-stream left nothing beside the data dir")
}

// checkSigtermDuringSnapshot stops the store with SIGTERM while it streams
// a snapshot: it exits cleanly, removes the temporary file, and restarts on
// its data at the same revision.
func checkSigtermDuringSnapshot(t *testing.T, s *server) {
	t.Helper()
	c := s.Client()
	_, rev := getAll(t, c, 0)
	c.Close()
	startSnapshotSave(t, s)
	took, err := s.Stop(15 * time.Second)
	if err != nil && err.Error() != "signal: terminated" {
		t.Fatalf("exit after SIGTERM during a snapshot (in %v): %v; want status 0", took.Round(time.Millisecond), err)
	}
	if left := snapshotTemps(s); len(left) != 0 {
		t.Fatalf("SIGTERM during a snapshot left %q", left)
	}
	s.Start()
	c = s.Client()
	defer c.Close()
	if _, again := getAll(t, c, 0); again != rev {
		t.Fatalf("after SIGTERM during a snapshot the store restarted at revision %d, was %d", again, rev)
	}
	t.Logf("SIGTERM during a snapshot: exit in %v (%v), nothing left beside the data dir, restarted at revision %d", took.Round(time.Millisecond), err, rev)
}

// checkKill9DuringSnapshot kills the store with SIGKILL while it streams a
// snapshot: the temporary file it leaves is removed when it starts again.
func checkKill9DuringSnapshot(t *testing.T, s *server) {
	t.Helper()
	startSnapshotSave(t, s)
	s.Kill9()
	left := snapshotTemps(s)
	if len(left) == 0 {
		t.Fatal("no temporary snapshot file after SIGKILL mid-stream: the check proves nothing")
	}
	s.Start()
	if again := snapshotTemps(s); len(again) != 0 {
		t.Fatalf("the store started and kept %q", again)
	}
	t.Logf("SIGKILL during a snapshot left %d temporary directory; the store removed it when it started", len(left))
}
