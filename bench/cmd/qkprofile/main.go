// Command qkprofile profiles QuantyKube's store under the benchmark's
// workloads where it falls short of its targets: it starts
// bench/cmd/qkstore-pprof, runs each workload while it records a CPU profile
// of the store process, and writes <name>.pprof and <name>.top.txt (the
// `go tool pprof -top` view) into --out. bench/profile.sh builds and runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/bench/internal/etcdbench"
	"github.com/quantyroot/quantykube/bench/internal/keyspace"
	"github.com/quantyroot/quantykube/bench/internal/server"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "qkprofile:", err)
		os.Exit(1)
	}
}

func run() error {
	var bins server.Binaries
	var benchBin, work, out, goBin string
	var keys, puts int
	flag.StringVar(&bins.StorePprof, "store-pprof", "", "bench/cmd/qkstore-pprof binary")
	flag.StringVar(&benchBin, "etcd-benchmark", "", "etcd's benchmark tool")
	flag.StringVar(&work, "work", "", "scratch directory")
	flag.StringVar(&out, "out", "", "directory for the profiles")
	flag.StringVar(&goBin, "go", "go", "go command (for go tool pprof)")
	flag.IntVar(&keys, "keys", 100000, "keys of 1 KiB in the key space")
	flag.IntVar(&puts, "puts", 50000, "puts of the put@64 workload")
	var storeArgs string
	flag.StringVar(&storeArgs, "store-args", "", "extra flags for the store, space-separated (e.g. --cache-bytes=536870912)")
	flag.Parse()
	bins.StoreArgs = strings.Fields(storeArgs)
	if bins.StorePprof == "" || benchBin == "" || work == "" || out == "" {
		return fmt.Errorf("--store-pprof, --etcd-benchmark, --work and --out are required; bench/profile.sh passes them")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	ctx := context.Background()
	s, err := server.Start(ctx, server.QuantyKubePprof, bins, work)
	if err != nil {
		return err
	}
	defer s.Stop()
	c, err := s.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	p := &profiler{base: s.PprofURL, out: out, goBin: goBin}

	put := etcdbench.Workload{Name: "put64", Clients: 64, Conns: 8, Section: "Summary:",
		Args: []string{"put", "--total", fmt.Sprint(puts), "--val-size", "1024", "--key-size", "8", "--key-space-size", "100000", "--sequential-keys"}}
	if err := p.record("put64", 10, true, func() error {
		r, _, err := etcdbench.Run(ctx, benchBin, s.Endpoint, put)
		slog.Info("put64", "rps", int(r.Throughput), "p99_ms", r.P99*1000)
		return err
	}); err != nil {
		return err
	}
	if _, err := c.Put(ctx, "/bench/range-key", strings.Repeat("r", 1024)); err != nil {
		return fmt.Errorf("write the range key: %w", err)
	}
	rng := etcdbench.Workload{Name: "range64", Clients: 64, Conns: 8, Section: "Summary:",
		Args: []string{"range", "/bench/range-key", "--consistency", "l", "--total", fmt.Sprint(2 * puts)}}
	if err := p.record("range64", 10, true, func() error {
		r, _, err := etcdbench.Run(ctx, benchBin, s.Endpoint, rng)
		slog.Info("range64", "rps", int(r.Throughput), "p99_ms", r.P99*1000)
		return err
	}); err != nil {
		return err
	}
	var revs []int64
	if err := p.record("create64", 25, false, func() error {
		st, r, err := keyspace.Create(ctx, c, keys, 1024, 64)
		revs = r
		slog.Info("create64", "per_s", int(st.PerSecond()), "p99", st.P99)
		return err
	}); err != nil {
		return err
	}
	if err := memory(p.base, s.Pid()); err != nil {
		return err
	}
	if err := countCosts(ctx, c); err != nil {
		return err
	}
	if err := p.record("paged-range", 10, true, func() error {
		for i := 0; i < 5; i++ {
			d, err := keyspace.PagedRange(ctx, c, 10000, keys)
			if err != nil {
				return err
			}
			slog.Info("paged range", "took", d)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := p.record("rangestream", 15, true, func() error {
		for i := 0; i < 3; i++ {
			d, err := keyspace.RangeStream(ctx, c, keys)
			if err != nil {
				return err
			}
			slog.Info("RangeStream", "took", d)
		}
		return nil
	}); err != nil {
		return err
	}
	return p.record("update64", 20, true, func() error {
		st, err := keyspace.Update(ctx, c, revs, 1024, 64)
		slog.Info("update64", "per_s", int(st.PerSecond()), "p99", st.P99)
		return err
	})
}

type profiler struct{ base, out, goBin string }

// record runs fn while the store records a CPU profile of seconds, and saves
// it. With repeat, fn runs again until the window closes (a CPU profile only
// samples on-CPU time, so an idle tail does not skew it either way).
func (p *profiler) record(name string, seconds int, repeat bool, fn func() error) error {
	type result struct {
		data []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("%s/profile?seconds=%d", p.base, seconds))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		ch <- result{b, err}
	}()
	time.Sleep(200 * time.Millisecond) // the profile starts before the load
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	for {
		if err := fn(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if !repeat || time.Now().After(deadline.Add(-time.Second)) {
			break
		}
	}
	r := <-ch
	if r.err != nil {
		return fmt.Errorf("fetch CPU profile of %s: %w", name, r.err)
	}
	file := filepath.Join(p.out, name+".pprof")
	if err := os.WriteFile(file, r.data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	top, err := exec.Command(p.goBin, "tool", "pprof", "-top", "-nodecount=40", file).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go tool pprof -top %s: %w: %s", file, err, top)
	}
	cum, err := exec.Command(p.goBin, "tool", "pprof", "-top", "-cum", "-nodecount=40", file).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go tool pprof -top -cum %s: %w: %s", file, err, cum)
	}
	txt := filepath.Join(p.out, name+".top.txt")
	if err := os.WriteFile(txt, append(append(top, "\n--- by cumulative ---\n"...), cum...), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", txt, err)
	}
	slog.Info("profile saved", "workload", name, "pprof", file, "top", txt)
	return nil
}

// countCosts logs what one Range over the key space costs in the shapes a
// paged list needs: the first page with its count, a count alone, a page
// near the end, to show how much of a page's time is counting the rest.
func countCosts(ctx context.Context, c *clientv3.Client) error {
	end := clientv3.WithRange(clientv3.GetPrefixRangeEnd(keyspace.Prefix))
	shapes := []struct {
		name string
		key  string
		opts []clientv3.OpOption
	}{
		{"first page (limit 10000) with count", keyspace.Prefix, []clientv3.OpOption{end, clientv3.WithLimit(10000)}},
		{"limit 1 with count", keyspace.Prefix, []clientv3.OpOption{end, clientv3.WithLimit(1)}},
		{"count only", keyspace.Prefix, []clientv3.OpOption{end, clientv3.WithCountOnly()}},
		{"keys only, all", keyspace.Prefix, []clientv3.OpOption{end, clientv3.WithKeysOnly()}},
		{"last page (limit 10000)", keyspace.Key(90000), []clientv3.OpOption{end, clientv3.WithLimit(10000)}},
	}
	for _, sh := range shapes {
		var best time.Duration
		for i := 0; i < 3; i++ {
			t := time.Now()
			if _, err := c.Get(ctx, sh.key, sh.opts...); err != nil {
				return fmt.Errorf("range %s: %w", sh.name, err)
			}
			if d := time.Since(t); best == 0 || d < best {
				best = d
			}
		}
		slog.Info("range cost", "shape", sh.name, "best_of_3", best)
	}
	return nil
}

// memory logs the store's RSS and its Go heap (from the pprof heap page), to
// tell the Go heap from pebble's memtables and block cache, which pebble
// allocates outside it.
func memory(base string, pid int) error {
	rss, err := server.RSS(pid)
	if err != nil {
		return err
	}
	resp, err := http.Get(base + "/heap?debug=1")
	if err != nil {
		return fmt.Errorf("fetch heap profile: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read heap profile: %w", err)
	}
	attrs := []any{"rss_mib", rss >> 20}
	for _, line := range strings.Split(string(b), "\n") {
		for _, k := range []string{"# HeapInuse = ", "# HeapSys = ", "# Sys = "} {
			if v, ok := strings.CutPrefix(line, k); ok {
				var n int64
				fmt.Sscan(v, &n)
				attrs = append(attrs, strings.Trim(k, "# =")+"_mib", n>>20)
			}
		}
	}
	slog.Info("memory after loading", attrs...)
	return nil
}
