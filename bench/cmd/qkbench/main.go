// Command qkbench runs the same workloads against QuantyKube's store, etcd
// and kine (SQLite), interleaved store by store (A B C A B C …), and writes
// a markdown report with medians, min–max spreads and ratios to etcd.
// bench/run.sh builds everything it needs and calls it.
//
// Exit status: 0 when every expected workload produced figures on every
// store (or is recorded as not applicable, with the reason); 1 otherwise.
// Numbers are never asserted.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quantyroot/quantykube/bench/internal/report"
	"github.com/quantyroot/quantykube/bench/internal/server"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "qkbench:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		h                              harness
		quick                          bool
		runs                           int
		out, jsonOut, analysis, stores string
		only, versions                 string
		members, keys                  int
		copyPages                      string
	)
	flag.IntVar(&keys, "keys", 0, "size run: the key space workload with this many keys (e.g. 1000000); "+
		"unless given, --only keyspace, --stores quantykube,etcd and --runs 1, and no writes during full LISTs")
	flag.StringVar(&copyPages, "copy-page-sizes", "0", "storemove page sizes of the move copy on the etcd run, comma-separated, one copy each "+
		"(0: storemove's default, the move's; e.g. 0,10000 to compare)")
	flag.IntVar(&members, "members", 1, "members per store: 1, or 3 for the replicated runs (put@64, txn, ranges, leader failover; quantykube and etcd only)")
	flag.BoolVar(&quick, "quick", false, "small sizes, one run: a smoke check that every workload runs")
	flag.IntVar(&runs, "runs", 3, "interleaved runs per store (the full run needs at least 3)")
	flag.StringVar(&h.bins.Store, "store", "", "quantykube binary")
	flag.StringVar(&h.bins.Etcd, "etcd", "", "etcd binary")
	flag.StringVar(&h.bins.Kine, "kine", "", "kine binary")
	flag.StringVar(&h.benchBin, "etcd-benchmark", "", "etcd's benchmark tool")
	flag.StringVar(&h.apiserver, "kube-apiserver", "", "kube-apiserver binary")
	flag.StringVar(&h.work, "work", "", "scratch directory for data dirs and logs (same filesystem for all stores)")
	flag.StringVar(&out, "out", "", "markdown report to write")
	flag.StringVar(&jsonOut, "json", "", "raw results (JSON) to write after every store run")
	flag.StringVar(&analysis, "analysis", "", "markdown file appended to the report (profiles, explanations)")
	flag.StringVar(&stores, "stores", strings.Join(server.Kinds, ","), "stores to run, in interleaving order")
	flag.StringVar(&only, "only", "", "comma-separated workload groups to run: etcd,kube,keyspace (default all)")
	flag.BoolVar(&h.keepData, "keep-data", false, "keep each store's data dir after its run (default: logs only)")
	var fromJSON string
	flag.StringVar(&fromJSON, "from-json", "", "only render --out from results saved by an earlier run (e.g. after editing bench/analysis.md)")
	var variants multiFlag
	flag.Var(&variants, "variant", "extra store column NAME=FLAGS: quantykube store with FLAGS (space-separated; --bin=PATH runs another quantykube binary, e.g. the previous commit's), e.g. "+
		"'quantykube-cache512=--cache-bytes=536870912'; add NAME to --stores (repeatable)")
	flag.StringVar(&versions, "versions", "", "extra version lines for the report, key=value;key=value")
	flag.Parse()
	if (quick || keys > 0) && !isSet("runs") {
		runs = 1
	}
	if fromJSON != "" {
		return render(fromJSON, out, stores, analysis)
	}
	for name, v := range map[string]string{"--store": h.bins.Store, "--etcd": h.bins.Etcd, "--kine": h.bins.Kine,
		"--etcd-benchmark": h.benchBin, "--kube-apiserver": h.apiserver, "--work": h.work, "--out": out} {
		if v == "" {
			return fmt.Errorf("%s is empty; bench/run.sh passes it (run that, or pass the path)", name)
		}
	}
	if runs < 1 {
		return fmt.Errorf("--runs %d: pass 1 or more", runs)
	}
	if keys < 0 || (keys > 0 && members != 1) {
		return fmt.Errorf("--keys %d: pass a positive key count, with one member", keys)
	}
	if keys > 0 && !isSet("only") {
		only = "keyspace"
	}
	if keys > 0 && !isSet("stores") {
		stores = server.QuantyKube + "," + server.Etcd
	}
	pageSizes, err := parseInts(copyPages)
	if err != nil {
		return fmt.Errorf("--copy-page-sizes %q: %w", copyPages, err)
	}
	h.only = map[string]bool{}
	for _, g := range strings.Split(only, ",") {
		if g = strings.TrimSpace(g); g != "" {
			h.only[g] = true
		}
	}
	h.variants = map[string][]string{}
	for _, v := range variants {
		name, args, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return fmt.Errorf("--variant %q: use NAME=FLAGS, e.g. quantykube-cache512=--cache-bytes=536870912", v)
		}
		h.variants[name] = strings.Fields(args)
	}
	if members != 1 && members != 3 {
		return fmt.Errorf("--members %d: use 1 or 3", members)
	}
	h.members = members
	if members == 3 && !isSet("stores") {
		stores = server.QuantyKube + "," + server.Etcd
	}
	kinds := strings.Split(stores, ",")
	for _, k := range kinds {
		if members == 3 && k != server.QuantyKube && k != server.Etcd {
			return fmt.Errorf("--members 3 runs %s and %s only; drop %q from --stores", server.QuantyKube, server.Etcd, k)
		}
		if _, ok := h.variants[k]; !ok && k != server.QuantyKube && k != server.Etcd && k != server.Kine {
			return fmt.Errorf("--stores names %q, which is neither %s, %s, %s nor a --variant", k, server.QuantyKube, server.Etcd, server.Kine)
		}
	}
	h.p = paramsFor(quick)
	if keys > 0 {
		h.p = h.p.withKeys(keys)
	}
	h.p.CopyPageSizes = pageSizes
	h.res = &report.Results{Quick: quick, Runs: runs, Members: members, Keys: keys, Started: time.Now()}
	h.res.LoadBefore = loadavg()
	h.res.Machine = machine(h.work)
	h.res.Versions = append(binVersions(h), parseKV(versions)...)
	h.res.Parameters = describe(h.p, members)
	if jsonOut == "" {
		jsonOut = filepath.Join(h.work, "results.json")
	}

	h.expectAll(kinds)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	for r := 1; r <= runs && ctx.Err() == nil; r++ {
		for _, kind := range kinds {
			if ctx.Err() != nil {
				break
			}
			t := time.Now()
			slog.Info("store run", "run", r, "store", kind)
			run := h.runStore
			if members == 3 {
				run = h.runCluster
			}
			if err := run(ctx, r, kind); err != nil {
				h.res.Fail("run %d, %s: %v", r, kind, err)
				slog.Error("store run failed", "run", r, "store", kind, "err", err)
			}
			slog.Info("store run done", "run", r, "store", kind, "took", time.Since(t).Round(time.Second))
			if err := h.res.Save(jsonOut); err != nil {
				return err
			}
		}
	}
	if ctx.Err() != nil {
		h.res.Fail("interrupted: %v", ctx.Err())
	}
	h.res.Finished = time.Now()
	h.res.LoadAfter = loadavg()
	if err := h.res.Save(jsonOut); err != nil {
		return err
	}
	if err := write(h.res, out, kinds, analysis); err != nil {
		return err
	}
	slog.Info("report written", "path", out, "json", jsonOut)
	return check(h.res, "the logs under "+h.work)
}

// render re-renders a report from saved results.
func render(jsonPath, out, stores, analysis string) error {
	if out == "" {
		return fmt.Errorf("--out is empty; pass the markdown file to write")
	}
	res, err := report.Load(jsonPath)
	if err != nil {
		return err
	}
	if err := write(res, out, strings.Split(stores, ","), analysis); err != nil {
		return err
	}
	return check(res, jsonPath)
}

func write(res *report.Results, out string, kinds []string, analysis string) error {
	var extra string
	if analysis != "" {
		b, err := os.ReadFile(analysis)
		if err != nil {
			return fmt.Errorf("read --analysis %s: %w", analysis, err)
		}
		extra = string(b)
	}
	tg := targets()
	if res.Members == 3 || res.Keys > 0 {
		// The targets and bench/analysis.md are about the main run.
		tg, extra = nil, ""
	}
	return report.Render(res, out, kinds, server.Etcd, tg, intro(res), extra)
}

// check prints every problem and fails if there is one.
func check(res *report.Results, where string) error {
	if problems := res.Check(); len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "FAIL:", p)
		}
		return fmt.Errorf("%d problem(s): workloads that did not run or failed; see above and %s", len(problems), where)
	}
	fmt.Fprintln(os.Stderr, "every workload ran on every store")
	return nil
}

func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func parseKV(s string) []report.KV {
	var out []report.KV
	for _, part := range strings.Split(s, ";") {
		if k, v, ok := strings.Cut(part, "="); ok {
			out = append(out, report.KV{Key: strings.TrimSpace(k), Value: strings.TrimSpace(v)})
		}
	}
	return out
}

// parseInts parses a comma-separated list of non-negative integers.
func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a page size (0 or more)", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
