package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/quantyroot/quantykube/bench/internal/report"
	"github.com/quantyroot/quantykube/internal/install/storemove"
)

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ") + " (1, 5, 15 min)"
}

func machine(work string) []report.KV {
	kv := []report.KV{
		{Key: "CPU", Value: fmt.Sprintf("%d × %s", runtime.NumCPU(), cpuModel())},
		{Key: "memory", Value: memTotal()},
		{Key: "kernel", Value: cmdOut("uname", "-sr")},
		{Key: "filesystem of every data dir", Value: fsOf(work)},
	}
	return kv
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(rest), &kb)
			return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	return "unknown"
}

func fsOf(dir string) string {
	out := cmdOut("df", "-T", dir)
	lines := strings.Split(out, "\n")
	if len(lines) < 2 {
		return "unknown"
	}
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 2 {
		return "unknown"
	}
	return fmt.Sprintf("%s (%s)", f[1], f[0])
}

func cmdOut(name string, args ...string) string {
	b, err := exec.Command(name, args...).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// binVersions asks each binary for its version.
func binVersions(h harness) []report.KV {
	first := func(s string) string {
		l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
		return l
	}
	return []report.KV{
		{Key: "etcd", Value: first(cmdOut(h.bins.Etcd, "--version"))},
		{Key: "kine", Value: first(cmdOut(h.bins.Kine, "--version"))},
		{Key: "kube-apiserver", Value: first(cmdOut(h.apiserver, "--version"))},
		{Key: "etcd benchmark tool", Value: "go.etcd.io/etcd/v3@v3.6.8 tools/benchmark"},
		{Key: "harness Go", Value: runtime.Version()},
	}
}

func describe(p params, members int) []report.KV {
	if members == 3 {
		return []report.KV{
			{Key: "values", Value: fmt.Sprintf("%d B", p.ValueSize)},
			{Key: "cluster", Value: "3 members on 127.0.0.1 (plain HTTP peers and clients), etcd's flags (--initial-cluster ... --initial-cluster-state new), fsync on, default heartbeat/election settings"},
			{Key: "etcd benchmark", Value: fmt.Sprintf("--endpoints all three (the tool spreads its 8 connections over them); put 64 clients: %d requests; txn-put 64: %d; "+
				"range 64 on one 1 KiB key: %d linearizable, %d serializable", p.Put64Total, p.TxnTotal, p.RangeTotal, p.RangeTotal)},
			{Key: "failover", Value: fmt.Sprintf("%d leader kills per run: one writer per surviving member (a client of that member alone, a put issued every %s, open loop, 2 s timeout), "+
				"kill -9 of the leader; times from the kill to a survivor's Status() naming a new leader (polled every 10 ms) and to the first acknowledged put issued after the kill; "+
				"the member restarts on its data dir and the cluster is healthy again before the next kill", p.Failovers, failoverWriteGap)},
		}
	}
	return []report.KV{
		{Key: "values", Value: fmt.Sprintf("%d B", p.ValueSize)},
		{Key: "etcd benchmark", Value: fmt.Sprintf("put 1 client: %d requests; put 64 clients/8 conns: %d; txn-put 64/8: %d (1 put each); "+
			"range 64/8 linearizable on one 1 KiB key: %d; watch-latency: %d puts at %d/s to 100 watchers (10 streams × 10)",
			p.Put1Total, p.Put64Total, p.TxnTotal, p.RangeTotal, p.WatchPuts, p.WatchRate)},
		{Key: "kube-apiserver", Value: fmt.Sprintf("%d ConfigMaps (%d B of data each), %d concurrent client-go clients; "+
			"LIST all = median of %d full LISTs (default options: resourceVersion \"\", no limit)", p.ConfigMaps, p.ValueSize, p.KubeClients, p.KubeLists)},
		{Key: "key space", Value: keyspaceDescription(p)},
		{Key: "move copy", Value: moveCopyDescription(p)},
	}
}

func keyspaceDescription(p params) string {
	s := fmt.Sprintf("%d keys created with %d concurrent clients as create transactions (load time: all of them, first to last), then each updated once; "+
		"paged range at %d keys a page (the apiserver's watch-cache page size), later pages at the first page's revision",
		p.Keys, p.KeyWorkers, p.PageSize)
	if p.ListWriteFor == 0 {
		s += "; no writes during full LISTs in a size run (one LIST of this many keys takes about as long as their window)"
	}
	return s
}

func moveCopyDescription(p params) string {
	var pages []string
	for _, ps := range p.CopyPageSizes {
		if ps == 0 {
			pages = append(pages, fmt.Sprintf("the move's own pages (the first of %d keys, the later ones sized to ~8 MiB, each at most twice the one before)", storemove.DefaultPageSize))
			continue
		}
		pages = append(pages, fmt.Sprintf("pages of %d keys", ps))
	}
	return fmt.Sprintf("on the etcd run, after the key space's updates: storemove.Copier.Bulk (the bulk copy of `quantykube install store`) of etcd's whole "+
		"keyspace (the key space and whatever keys the earlier workloads left: see “keys copied”) in %s, "+
		"into a fresh store opened in the harness's process as the move opens it (default options, fsync on) on the servers' filesystem; "+
		"rate = keys ÷ Bulk's duration (first read of etcd to the import's synced finish). Its figures are in etcd's column, the copy's source",
		strings.Join(pages, " and in "))
}

func intro(res *report.Results) string {
	switch {
	case res.Members == 3:
		return introMembers(res.Quick)
	case res.Keys > 0:
		return introKeys(res.Quick, res.Keys)
	}
	return introMain(res.Quick)
}

const quickNote = "\n\n**This is a `--quick` smoke run: sizes are small and there is one run; the figures are not comparable with the full run.**"

func introKeys(quick bool, keys int) string {
	s := fmt.Sprintf(`# Benchmarks: a key space of %s keys, QuantyKube's store and etcd

Generated by `+"`bench/run.sh --keys %d`"+` (the harness is `+"`bench/cmd/qkbench`"+`): the key space workload alone at this
size (load, full paged LIST, RangeStream, updates, compaction, RSS and disk between the steps, and the move copy
out of the etcd run). Every store runs on this one machine with its data dir on the same filesystem and fsync on,
default settings (etcd with an 8 GiB --quota-backend-bytes: its 2 GiB default stops a 1M-key run); stores are
interleaved run by run, each run on an empty data dir. The main report
(docs/benchmarks.md, 100,000 keys) judges the targets; this one does not.`, withCommas(keys), keys)
	if quick {
		s += quickNote
	}
	return s
}

func introMembers(quick bool) string {
	s := `# Benchmarks: 3-member QuantyKube store and 3-member etcd, side by side

Generated by ` + "`bench/run.sh --members 3`" + ` (the harness is ` + "`bench/cmd/qkbench`" + `). Each store runs as 3 members on
this one machine (all on loopback, the same filesystem, fsync on, default settings), started with etcd's
clustering flags; stores are interleaved run by run and each run starts a fresh cluster on empty data dirs.
The three members share the machine's 2 cores, so these figures measure replication on one host, not a network.`
	if quick {
		s += quickNote
	}
	return s
}

func introMain(quick bool) string {
	s := `# Benchmarks: QuantyKube's store, etcd and kine, side by side

Generated by ` + "`bench/run.sh`" + ` (the harness is ` + "`bench/cmd/qkbench`" + `); do not edit the generated
sections by hand — edit ` + "`bench/analysis.md`" + ` and re-run. Every store runs on this one machine, in one run, with
its data dir on the same filesystem and fsync on (etcd: single member, default settings but an 8 GiB --quota-backend-bytes; kine:
SQLite, its default; QuantyKube: default settings, never ` + "`--unsafe-no-fsync`" + `). Stores are interleaved run by run
(quantykube, etcd, kine, quantykube, etcd, kine, …); each run starts each store on an empty data dir.`
	if quick {
		s += quickNote
	}
	return s
}

// withCommas prints n with thousands separators.
func withCommas(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
