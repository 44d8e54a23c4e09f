package main

import (
	"errors"
	"log/slog"

	"github.com/quantyroot/quantykube/bench/internal/report"
	"github.com/quantyroot/quantykube/bench/internal/server"
)

// metricCPU is the server's CPU time (user+system) per 1,000 requests: less
// sensitive than throughput to other load on a shared machine.
const metricCPU = "server CPU per 1k requests"

// cpuMeter starts measuring the server's CPU time; the returned function
// records, under workload, the CPU milliseconds per 1,000 of the n requests
// sent since then (nothing if /proc could not be read).
func (h *harness) cpuMeter(s *server.Server, add adder) func(workload string, n int) {
	t0, err0 := server.CPUTime(s.Pid())
	return func(workload string, n int) {
		t1, err1 := server.CPUTime(s.Pid())
		if err0 != nil || err1 != nil || n == 0 {
			slog.Warn("no CPU time of the server", "workload", workload, "err", errors.Join(err0, err1))
			return
		}
		add(workload, metricCPU, "ms", report.Lower, float64((t1-t0).Microseconds())/float64(n))
	}
}
