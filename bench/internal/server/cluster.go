package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quantyroot/quantykube/test/ports"
)

// ErrNoClustering means the quantykube binary has no --initial-cluster flag
// yet: it cannot run as a replicated cluster.
var ErrNoClustering = errors.New("quantykube store has no --initial-cluster flag yet (replication, issue #13): no 3-member figures")

// SupportsClustering reports whether `bin store --help` lists --initial-cluster.
func SupportsClustering(bin string) (bool, error) {
	out, err := exec.Command(bin, "store", "--help").CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("%s store --help: %w", bin, err)
	}
	return strings.Contains(string(out), "--initial-cluster"), nil
}

// Cluster is n members of one kind (etcd or quantykube) on loopback, started
// with etcd's clustering flags, fsync on. Invariant: Members[i] keeps its
// name, URLs and data dir across Kill and Restart.
type Cluster struct {
	Kind    string
	Members []*Server
	bin     string
	args    [][]string // each member's command line
	logs    []string
}

// StartCluster starts n members of kind (Etcd or QuantyKube) under dir and
// waits until a linearizable read through every endpoint succeeds.
func StartCluster(ctx context.Context, kind string, bins Binaries, dir string, n int) (*Cluster, error) {
	c := &Cluster{Kind: kind}
	switch kind {
	case Etcd:
		c.bin = bins.Etcd
	case QuantyKube:
		c.bin = bins.Store
		ok, err := SupportsClustering(c.bin)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, ErrNoClustering
		}
	default:
		return nil, fmt.Errorf("no cluster of %s: use %s or %s", kind, Etcd, QuantyKube)
	}
	free, err := ports.Free(2 * n)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, free[2*i+1]))
	}
	for i := range n {
		s := &Server{Kind: kind, Endpoint: fmt.Sprintf("127.0.0.1:%d", free[2*i]),
			DataDir: filepath.Join(dir, fmt.Sprintf("m%d.data", i))}
		client, peer := "http://"+s.Endpoint, fmt.Sprintf("http://127.0.0.1:%d", free[2*i+1])
		var args []string
		if kind == QuantyKube {
			args = append(args, "store")
		}
		args = append(args, "--name", fmt.Sprintf("m%d", i), "--data-dir", s.DataDir,
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new", "--log-level", "warn")
		if kind == QuantyKube {
			args = append(args, bins.StoreArgs...)
		} else {
			args = append(args, "--quota-backend-bytes", strconv.Itoa(EtcdQuotaBytes))
		}
		c.Members = append(c.Members, s)
		c.args = append(c.args, args)
		c.logs = append(c.logs, filepath.Join(dir, fmt.Sprintf("%s-m%d.log", kind, i)))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	for i := range c.Members {
		if err := c.Restart(i); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.WaitHealthy(ctx, time.Minute); err != nil {
		c.Stop()
		return nil, err
	}
	slog.Info("cluster ready", "kind", kind, "endpoints", c.Endpoints())
	return c, nil
}

// Endpoints are the members' host:port client addresses.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, s := range c.Members {
		eps = append(eps, s.Endpoint)
	}
	return eps
}

// Restart starts member i's process (again) with its flags and data dir.
func (c *Cluster) Restart(i int) error {
	return c.Members[i].launch(c.bin, c.args[i], c.logs[i], "")
}

// Kill SIGKILLs member i and waits until it is reaped.
func (c *Cluster) Kill(i int) {
	s := c.Members[i]
	_ = s.cmd.Process.Kill()
	err := <-s.done
	s.done <- err
	s.log.Close()
}

// Leader returns the index of the member that says it leads, or -1.
func (c *Cluster) Leader(ctx context.Context) int {
	for i, s := range c.Members {
		if st, err := status(ctx, s.Endpoint); err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
			return i
		}
	}
	return -1
}

// WaitHealthy waits until every member answers Status() with a leader and a
// linearizable read through all endpoints succeeds.
func (c *Cluster) WaitHealthy(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("client of %s cluster: %w", c.Kind, err)
	}
	defer cl.Close()
	for {
		err := c.healthy(ctx, cl)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s cluster not healthy within %s (logs %v): %w", c.Kind, limit, c.logs, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) healthy(ctx context.Context, cl *clientv3.Client) error {
	for _, s := range c.Members {
		st, err := status(ctx, s.Endpoint)
		if err != nil {
			return err
		}
		if st.Leader == 0 {
			return fmt.Errorf("%s has no leader", s.Endpoint)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := cl.Get(rctx, "/bench/ready-probe")
	return err
}

// Stop stops every member (SIGTERM, SIGKILL after 15 s).
func (c *Cluster) Stop() {
	for _, s := range c.Members {
		if s.cmd == nil {
			continue
		}
		select {
		case err := <-s.done:
			s.done <- err // already dead (killed and not restarted)
			continue
		default:
		}
		if err := s.Stop(); err != nil {
			slog.Warn("stop member", "kind", c.Kind, "endpoint", s.Endpoint, "err", err)
		}
	}
}

// status makes one Status() call to endpoint with a short timeout.
func status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.Status(ctx, endpoint)
}

// MemberID is member i's raft member ID, from Status().
func (c *Cluster) MemberID(ctx context.Context, i int) (uint64, error) {
	st, err := status(ctx, c.Members[i].Endpoint)
	if err != nil {
		return 0, err
	}
	return st.Header.MemberId, nil
}

// LeaderID is the leader member i reports (0: none), from Status().
func (c *Cluster) LeaderID(ctx context.Context, i int) (uint64, error) {
	st, err := status(ctx, c.Members[i].Endpoint)
	if err != nil {
		return 0, err
	}
	return st.Leader, nil
}
