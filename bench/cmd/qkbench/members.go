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
	"go.uber.org/zap"

	"github.com/quantyroot/quantykube/bench/internal/etcdbench"
	"github.com/quantyroot/quantykube/bench/internal/report"
	"github.com/quantyroot/quantykube/bench/internal/server"
)

// clusterSuffix marks the workloads of the 3-member mode, so that their
// figures never mix with the single-member ones in a report.
const clusterSuffix = ", 3 members"

// wlFailover is the leader-kill workload of the 3-member mode.
const wlFailover = "leader kill -9 under light writes" + clusterSuffix

// clusterWorkloads are etcd's benchmark tool runs of the 3-member mode: the
// tool spreads its connections over the three endpoints (followers forward
// writes to the leader), as a kube-apiserver with three --etcd-servers does.
func (p params) clusterWorkloads() []etcdbench.Workload {
	var out []etcdbench.Workload
	for _, w := range p.etcdWorkloads() {
		switch w.Name {
		case "put, 64 clients", "txn-put, 64 clients", "range (linearizable), 64 clients":
			w.Name += clusterSuffix
			out = append(out, w.Workload)
		}
	}
	return append(out, etcdbench.Workload{Name: "range (serializable), 64 clients" + clusterSuffix,
		Args:    []string{"range", rangeKey, "--consistency", "s", "--total", fmt.Sprint(p.RangeTotal)},
		Clients: 64, Conns: 8, Section: "Summary:", Requests: p.RangeTotal})
}

// clusterWorkloadNames lists every workload of the 3-member mode.
func (p params) clusterWorkloadNames() []string {
	var names []string
	for _, w := range p.clusterWorkloads() {
		names = append(names, w.Name)
	}
	return append(names, wlFailover)
}

// runCluster runs the 3-member workloads once against a fresh cluster of
// kind. A store binary without --initial-cluster is recorded as not
// applicable (with the reason), not as a failure.
func (h *harness) runCluster(ctx context.Context, run int, kind string) error {
	dir := filepath.Join(h.work, fmt.Sprintf("run%d-%s-3m", run, kind))
	c, err := server.StartCluster(ctx, kind, h.bins, dir, 3)
	if errors.Is(err, server.ErrNoClustering) {
		for _, w := range h.p.clusterWorkloadNames() {
			h.res.NA(kind, w, err.Error())
		}
		slog.Warn("skipping the store's 3-member runs", "reason", err)
		return nil
	}
	if err != nil {
		return err
	}
	defer func() {
		c.Stop()
		if !h.keepData {
			for _, m := range c.Members {
				_ = os.RemoveAll(m.DataDir)
			}
		}
	}()
	add := func(workload, metric, unit string, better report.Better, v float64) {
		h.res.Add(report.Sample{Run: run, Store: kind, Workload: workload, Metric: metric, Unit: unit, Better: better, Value: v})
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("client of the %s cluster: %w", kind, err)
	}
	defer cl.Close()
	if _, err := cl.Put(ctx, rangeKey, strings.Repeat("r", h.p.ValueSize)); err != nil {
		return fmt.Errorf("write the range key: %w", err)
	}
	endpoints := strings.Join(c.Endpoints(), ",")
	for _, w := range h.p.clusterWorkloads() {
		r, _, err := etcdbench.Run(ctx, h.benchBin, endpoints, w)
		if err != nil {
			h.res.Fail("run %d, %s, %s: %v", run, kind, w.Name, err)
			continue
		}
		slog.Info("etcd benchmark", "run", run, "store", kind, "workload", w.Name, "rps", int(r.Throughput), "p99_ms", r.P99*1000)
		add(w.Name, "throughput", "req/s", report.Higher, r.Throughput)
		add(w.Name, "p50", "ms", report.Lower, r.P50*1000)
		add(w.Name, "p99", "ms", report.Lower, r.P99*1000)
	}
	if err := h.runFailover(ctx, c, add); err != nil {
		h.res.Fail("run %d, %s, %s: %v", run, kind, wlFailover, err)
	}
	return nil
}
