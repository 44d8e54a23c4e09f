package main

import (
	"github.com/quantyroot/quantykube/bench/internal/report"
	"github.com/quantyroot/quantykube/bench/internal/server"
)

// harness is one invocation: where things are and what was measured.
type harness struct {
	bins      server.Binaries
	benchBin  string
	apiserver string
	work      string
	p         params
	res       *report.Results
	only      map[string]bool // workload groups to run (empty: all)
	keepData  bool
	variants  map[string][]string // extra store columns: name -> quantykube store flags
	members   int                 // 1, or 3: the replicated runs (runCluster)
}

func (h *harness) want(group string) bool { return len(h.only) == 0 || h.only[group] }

// expectAll records every workload every store must run, before any runs,
// so that a store that fails to start is reported workload by workload.
func (h *harness) expectAll(kinds []string) {
	for _, k := range kinds {
		if h.members == 3 {
			for _, w := range h.p.clusterWorkloadNames() {
				h.res.Expect(w, k)
			}
			continue
		}
		if h.want("etcd") {
			for _, w := range h.p.etcdWorkloads() {
				h.res.Expect(w.Name, k)
			}
		}
		if h.want("kube") {
			h.res.Expect(wlKube, k)
		}
		if h.want("keyspace") {
			for _, w := range h.keyspaceWorkloads(k) {
				h.res.Expect(w, k)
			}
		}
	}
}

// keyspaceWorkloads lists the workloads of the keyspace group on kind: the
// writes during LISTs unless the size run dropped them, and the move copies
// on etcd, their source.
func (h *harness) keyspaceWorkloads(kind string) []string {
	ws := []string{wlCreate, wlUpdate, wlKeyspace}
	if h.p.ListWriteFor > 0 {
		ws = append(ws, wlListWrites)
	}
	if kind == server.Etcd {
		for _, ps := range h.p.CopyPageSizes {
			ws = append(ws, moveCopyWorkload(ps))
		}
	}
	return ws
}
