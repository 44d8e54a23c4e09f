package testserver

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// cluster is the set of server processes one RunEtcd call started: one, or
// the members of a replicated cluster.
type cluster struct {
	cfgs  []*embed.Config
	procs []*process
}

// endpoints are the client URLs of every member, in member order.
func (c *cluster) endpoints() []string {
	var eps []string
	for _, cfg := range c.cfgs {
		eps = append(eps, cfg.ListenClientUrls[0].String())
	}
	return eps
}

// startCluster starts srv.members processes for cfg (see memberConfigs) and
// waits until every member answers Status() and, for a cluster, a
// linearizable read through all endpoints succeeds (a leader is elected).
// When a process dies before that because a port was taken meanwhile, every
// member is killed and the cluster retried on fresh ports and data dirs.
// The processes are stopped at test cleanup (see stop).
func startCluster(t testing.TB, srv server, cfg *embed.Config) *cluster {
	t.Helper()
	cfgs, err := memberConfigs(t, cfg, srv.members)
	if err != nil {
		t.Fatal(err)
	}
	logDir := t.TempDir()
	for try := 1; ; try++ {
		c := &cluster{cfgs: cfgs}
		for _, m := range cfgs {
			p, err := launch(srv, m, filepath.Join(logDir, fmt.Sprintf("%s-%d.log", m.Name, try)))
			if err != nil {
				c.kill()
				t.Fatal(err)
			}
			c.procs = append(c.procs, p)
		}
		err := c.waitReady()
		if err == nil {
			t.Cleanup(func() { c.stop(t) })
			return c
		}
		c.kill()
		if try < startTries && c.portTaken() {
			if perr := c.resetForRetry(); perr != nil {
				t.Fatal(perr)
			}
			continue
		}
		t.Fatalf("%s did not become ready: %v\n%s", srv.kind, err, c.logs())
	}
}

// waitReady waits for every member's Status() and, with more than one
// member, for a linearizable Get through all endpoints.
func (c *cluster) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	for i, p := range c.procs {
		if err := p.waitReady(c.cfgs[i], deadline); err != nil {
			return fmt.Errorf("%s: %w", c.cfgs[i].Name, err)
		}
	}
	if len(c.procs) == 1 {
		return nil
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("dial %v: %w", c.endpoints(), err)
	}
	defer cl.Close()
	var lastErr error
	for ctx.Err() == nil {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		_, lastErr = cl.Get(rctx, "/quantykube-testserver-ready")
		rcancel()
		if lastErr == nil {
			return nil
		}
		for _, p := range c.procs {
			select {
			case <-p.exited:
				return fmt.Errorf("a member exited before the cluster was ready: %v", p.waitErr)
			default:
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no linearizable read through %v within %s: %w", c.endpoints(), readyTimeout, lastErr)
}

// portTaken reports whether a member's log says one of its ports was taken.
func (c *cluster) portTaken() bool {
	for _, p := range c.procs {
		if bytes.Contains(p.logTail(), []byte("address already in use")) {
			return true
		}
	}
	return false
}

// resetForRetry gives every member fresh ports and an empty data dir: a
// half-initialised one could pin the old URLs.
func (c *cluster) resetForRetry() error {
	if err := reassignPorts(c.cfgs); err != nil {
		return err
	}
	for _, m := range c.cfgs {
		if err := os.RemoveAll(m.Dir); err != nil {
			return err
		}
		if err := os.MkdirAll(m.Dir, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// kill SIGKILLs every member and waits for them.
func (c *cluster) kill() {
	for _, p := range c.procs {
		p.kill()
	}
}

// stop ends the cluster at test cleanup: the followers first, all at once,
// then the leader, so that a stopping leader finds no peer to hand its
// leadership to and exits at once (etcd tries a leadership transfer on
// SIGTERM; stopping all three at once took 7 s here, followers first 1.3 s).
// With QK_K8S_STORAGE_FAST_STOP=1 the followers are SIGKILLed instead. Each member's problems (see process.terminate) fail the test;
// the logs are printed when the test failed or QK_STORE_LOG=always.
func (c *cluster) stop(t testing.TB) {
	leader := c.leaderIndex()
	var mu sync.Mutex
	var problems []error
	terminate := func(i int) {
		for _, err := range c.procs[i].terminate() {
			mu.Lock()
			problems = append(problems, fmt.Errorf("%s: %w", c.cfgs[i].Name, err))
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for i := range c.procs {
		switch {
		case i == leader:
		case leader >= 0 && os.Getenv("QK_K8S_STORAGE_FAST_STOP") == "1":
			// Each follower's graceful stop waits up to 1 s for its peers'
			// streams (etcd's embed closes peer listeners with a 1 s grace);
			// SIGKILL skips that. The leader's clean exit is still checked.
			wg.Go(func() { c.procs[i].kill() })
		default:
			wg.Go(func() { terminate(i) })
		}
	}
	wg.Wait()
	if leader >= 0 {
		terminate(leader)
	}
	for _, err := range problems {
		t.Error(err)
	}
	if t.Failed() || os.Getenv("QK_STORE_LOG") == "always" {
		t.Logf("%s", c.logs())
	}
}

// leaderIndex returns the index of the member that says it is the leader,
// or -1 (a single member, or no answer).
func (c *cluster) leaderIndex() int {
	if len(c.procs) == 1 {
		return -1
	}
	for i, ep := range c.endpoints() {
		st, err := statusOf(ep)
		if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
			return i
		}
	}
	return -1
}

// logs returns the tail of every member's log.
func (c *cluster) logs() string {
	var b bytes.Buffer
	for i, p := range c.procs {
		fmt.Fprintf(&b, "server log of %s (%s), last %d KiB:\n%s\n", c.cfgs[i].Name, p.logPath, logTailBytes>>10, p.logTail())
	}
	return b.String()
}
