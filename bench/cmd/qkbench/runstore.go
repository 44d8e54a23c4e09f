package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quantyroot/quantykube/bench/internal/etcdbench"
	"github.com/quantyroot/quantykube/bench/internal/keyspace"
	"github.com/quantyroot/quantykube/bench/internal/kube"
	"github.com/quantyroot/quantykube/bench/internal/report"
	"github.com/quantyroot/quantykube/bench/internal/server"
)

// metricStream is the list as kube-apiserver 1.37 does it: one RangeStream,
// or paged Range when the server answers Unimplemented.
const metricStream = "RangeStream (paged if unimplemented)"

const kineNoTxn = "kine answers every transaction that is not one of the shapes kube-apiserver sends " +
	"with “etcdserver: unsupported operations in txn request”; txn-put sends unconditional transactions"

// runStore runs every workload once against a fresh server of kind. Errors
// of single workloads are recorded and do not stop the others.
func (h *harness) runStore(ctx context.Context, run int, kind string) error {
	dir := filepath.Join(h.work, fmt.Sprintf("run%d-%s", run, kind))
	base, bins := kind, h.bins
	if args, ok := h.variants[kind]; ok {
		base = server.QuantyKube
		bin, rest := variantBinary(args)
		if bin != "" {
			bins.Store = bin
		}
		bins.StoreArgs = append(append([]string(nil), bins.StoreArgs...), rest...)
	}
	s, err := server.Start(ctx, base, bins, dir)
	if err != nil {
		return err
	}
	defer func() {
		if err := s.Stop(); err != nil {
			slog.Warn("stop server", "store", kind, "err", err)
		}
		// Keep the logs, drop the data: a full run would otherwise keep gigabytes.
		if !h.keepData {
			_ = os.RemoveAll(s.DataDir)
		}
	}()
	c, err := s.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	add := func(workload, metric, unit string, better report.Better, v float64) {
		h.res.Add(report.Sample{Run: run, Store: kind, Workload: workload, Metric: metric, Unit: unit, Better: better, Value: v})
	}

	if h.want("etcd") {
		h.runEtcdBench(ctx, run, kind, s, c, add)
	}
	if h.want("kube") {
		h.res.Expect(wlKube, kind)
		if err := h.runKube(ctx, kind, s, dir, add); err != nil {
			h.res.Fail("run %d, %s, %s: %v", run, kind, wlKube, err)
		}
	}
	if h.want("keyspace") {
		for _, w := range h.keyspaceWorkloads(kind) {
			h.res.Expect(w, kind)
		}
		if err := h.runKeyspace(ctx, run, kind, dir, s, c, add); err != nil {
			h.res.Fail("run %d, %s, %s: %v", run, kind, wlKeyspace, err)
		}
	}
	return nil
}

type adder func(workload, metric, unit string, better report.Better, v float64)

func (h *harness) runEtcdBench(ctx context.Context, run int, kind string, s *server.Server, c *clientv3.Client, add adder) {
	val := strings.Repeat("r", h.p.ValueSize)
	if _, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(rangeKey), "=", 0)).
		Then(clientv3.OpPut(rangeKey, val)).Commit(); err != nil {
		h.res.Fail("run %d, %s: write the range key: %v", run, kind, err)
	}
	for _, w := range h.p.etcdWorkloads() {
		h.res.Expect(w.Name, kind)
		if kind == server.Kine && w.kineRejects {
			h.res.NA(kind, w.Name, kineNoTxn)
			continue
		}
		start := time.Now()
		cpu := h.cpuMeter(s, add)
		r, _, err := etcdbench.Run(ctx, h.benchBin, s.Endpoint, w.Workload)
		if err != nil {
			h.res.Fail("run %d, %s, %s: %v", run, kind, w.Name, err)
			continue
		}
		slog.Info("etcd benchmark", "run", run, "store", kind, "workload", w.Name, "rps", int(r.Throughput),
			"p99_ms", r.P99*1000, "took", time.Since(start).Round(time.Millisecond))
		if w.Name == "watch-latency" {
			add(w.Name, "average", "ms", report.Lower, r.Average*1000)
		} else {
			add(w.Name, "throughput", "req/s", report.Higher, r.Throughput)
		}
		add(w.Name, "p50", "ms", report.Lower, r.P50*1000)
		add(w.Name, "p99", "ms", report.Lower, r.P99*1000)
		if w.Requests > 0 {
			cpu(w.Name, w.Requests)
		}
	}
}

func (h *harness) runKube(ctx context.Context, kind string, s *server.Server, dir string, add adder) error {
	start := time.Now()
	a, err := kube.StartAPIServer(ctx, h.apiserver, s.Endpoint, filepath.Join(dir, "apiserver"))
	if err != nil {
		return err
	}
	defer a.Stop()
	slog.Info("apiserver up", "store", kind, "took", time.Since(start).Round(time.Millisecond))
	storeCPU0, err0 := server.CPUTime(s.Pid())
	apiCPU0, err1 := server.CPUTime(a.Pid())
	r, err := kube.RunConfigMaps(ctx, a.Config, h.p.ConfigMaps, h.p.ValueSize, h.p.KubeClients, h.p.KubeLists)
	if err != nil {
		return err
	}
	storeCPU1, err2 := server.CPUTime(s.Pid())
	apiCPU1, err3 := server.CPUTime(a.Pid())
	if err := errors.Join(err0, err1, err2, err3); err != nil {
		return err
	}
	// Per 1,000 objects over the whole sequence (create, update, LISTs, delete).
	perK := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(h.p.ConfigMaps) }
	slog.Info("configmaps", "store", kind, "create_s", int(r.CreatePerSec), "update_s", int(r.UpdatePerSec),
		"delete_s", int(r.DeletePerSec), "list_ms", r.ListLatency.Milliseconds())
	add(wlKube, "creates", "objects/s", report.Higher, r.CreatePerSec)
	add(wlKube, "updates", "objects/s", report.Higher, r.UpdatePerSec)
	add(wlKube, "LIST all", "ms", report.Lower, float64(r.ListLatency.Microseconds())/1000)
	add(wlKube, "deletes", "objects/s", report.Higher, r.DeletePerSec)
	add(wlKube, "store CPU per 1k objects", "ms", report.Lower, perK(storeCPU1-storeCPU0))
	add(wlKube, "kube-apiserver CPU per 1k objects", "ms", report.Lower, perK(apiCPU1-apiCPU0))
	return nil
}

// runKeyspace is the key space workload on one store: load p.Keys keys
// (create transactions), read them all (paged range, RangeStream), update
// each once while measuring, then compact; RSS and disk are read between
// the steps. On etcd, the move copy runs after the updates, out of the
// loaded key space. dir is the store run's directory (scratch space for the
// copy's store).
func (h *harness) runKeyspace(ctx context.Context, run int, kind, dir string, s *server.Server, c *clientv3.Client, add adder) error {
	n := h.p.Keys
	cpu := h.cpuMeter(s, add)
	cs, revs, err := keyspace.Create(ctx, c, n, h.p.ValueSize, h.p.KeyWorkers)
	if err != nil {
		return err
	}
	slog.Info("key space loaded", "store", kind, "keys", n, "per_s", int(cs.PerSecond()), "p99", cs.P99, "took", cs.Elapsed.Round(time.Millisecond))
	add(wlCreate, "throughput", "writes/s", report.Higher, cs.PerSecond())
	add(wlCreate, "p99", "ms", report.Lower, ms(cs.P99))
	cpu(wlCreate, n)
	add(wlKeyspace, "load time", "s", report.Lower, cs.Elapsed.Seconds())

	time.Sleep(2 * time.Second) // let background flushes settle before RSS
	rss, err := server.RSS(s.Pid())
	if err != nil {
		return err
	}
	add(wlKeyspace, "RSS after loading", "MiB", report.Lower, mib(rss))

	paged, err := keyspace.PagedRange(ctx, c, h.p.PageSize, n)
	if err != nil {
		return err
	}
	add(wlKeyspace, "full paged range", "ms", report.Lower, ms(paged))
	stream, err := keyspace.RangeStream(ctx, c, n)
	switch {
	case errors.Is(err, keyspace.ErrUnimplemented):
		stream = paged
		h.res.NA(kind, "RangeStream", fmt.Sprintf("%s answers RangeStream with Unimplemented; its %q figure is the paged range, as kube-apiserver falls back to it", kind, metricStream))
	case err != nil:
		return err
	}
	add(wlKeyspace, metricStream, "ms", report.Lower, ms(stream))
	slog.Info("key space read", "store", kind, "paged", paged, "stream", stream, "rss_mib", int(mib(rss)))

	if h.p.ListWriteFor > 0 {
		if err := h.runListWrites(ctx, kind, c, revs, add); err != nil {
			return err
		}
	}

	cpu = h.cpuMeter(s, add)
	us, err := keyspace.Update(ctx, c, revs, h.p.ValueSize, h.p.KeyWorkers)
	if err != nil {
		return err
	}
	add(wlUpdate, "throughput", "writes/s", report.Higher, us.PerSecond())
	add(wlUpdate, "p99", "ms", report.Lower, ms(us.P99))
	cpu(wlUpdate, n)

	if kind == server.Etcd {
		for i, ps := range h.p.CopyPageSizes {
			copyDir := filepath.Join(dir, fmt.Sprintf("move-copy-%d", i))
			if err := h.runMoveCopy(ctx, c, copyDir, ps, add); err != nil {
				h.res.Fail("run %d, %s, %s: %v", run, kind, moveCopyWorkload(ps), err)
			}
		}
	}
	return h.runCompaction(ctx, kind, s, c, add)
}

// runListWrites measures update transactions while one client lists the
// whole key space every 10 ms (keyspace.WritesDuringLists).
func (h *harness) runListWrites(ctx context.Context, kind string, c *clientv3.Client, revs []int64, add adder) error {
	lw, err := keyspace.WritesDuringLists(ctx, c, revs, h.p.ValueSize, h.p.ListWriters, h.p.PageSize, h.p.ListWriteFor)
	if err != nil {
		return err
	}
	add(wlListWrites, "throughput", "writes/s", report.Higher, lw.Writes.PerSecond())
	add(wlListWrites, "p99", "ms", report.Lower, ms(lw.Writes.P99))
	add(wlListWrites, "full LISTs", "lists/s", report.Higher, float64(lw.Lists)/lw.Writes.Elapsed.Seconds())
	add(wlListWrites, "full LIST (mean)", "ms", report.Lower, ms(lw.ListMean))
	slog.Info("writes during lists", "store", kind, "writes_s", int(lw.Writes.PerSecond()), "p99", lw.Writes.P99, "lists", lw.Lists, "list_mean", lw.ListMean)
	return nil
}

// runCompaction measures the disk with two versions of every key, the
// compaction at the current revision (physical), the disk after it (etcd:
// also after a defragmentation) and the RSS at the end.
func (h *harness) runCompaction(ctx context.Context, kind string, s *server.Server, c *clientv3.Client, add adder) error {
	time.Sleep(2 * time.Second)
	before, err := server.DiskUsage(s.DataDir)
	if err != nil {
		return err
	}
	add(wlKeyspace, "disk, 2 versions/key, before compaction", "MiB", report.Lower, mib(before))
	cstart := time.Now()
	if _, err := keyspace.Compact(ctx, c); err != nil {
		return err
	}
	add(wlKeyspace, "compaction", "ms", report.Lower, ms(time.Since(cstart)))
	time.Sleep(5 * time.Second) // background compactions (pebble, SQLite) get a moment
	after, err := server.DiskUsage(s.DataDir)
	if err != nil {
		return err
	}
	add(wlKeyspace, "disk after compaction", "MiB", report.Lower, mib(after))
	if kind == server.Etcd {
		if err := keyspace.Defragment(ctx, c, s.Endpoint); err != nil {
			return err
		}
		defr, err := server.DiskUsage(s.DataDir)
		if err != nil {
			return err
		}
		add(wlKeyspace, "disk after compaction + defrag (etcd only)", "MiB", report.Lower, mib(defr))
	}
	rss, err := server.RSS(s.Pid())
	if err != nil {
		return err
	}
	add(wlKeyspace, "RSS at the end", "MiB", report.Lower, mib(rss))
	slog.Info("key space compacted", "store", kind, "before_mib", int(mib(before)), "after_mib", int(mib(after)))
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
func mib(b int64) float64        { return float64(b) / (1 << 20) }

// variantBinary splits a variant's --bin=PATH (another quantykube binary, for
// before/after runs of two commits in one interleaved run) from its store flags.
func variantBinary(args []string) (bin string, rest []string) {
	for _, a := range args {
		if p, ok := strings.CutPrefix(a, "--bin="); ok {
			bin = p
			continue
		}
		rest = append(rest, a)
	}
	return bin, rest
}
