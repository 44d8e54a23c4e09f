// Package etcdbench runs etcd's own benchmark tool (tools/benchmark of
// go.etcd.io/etcd/v3) against one endpoint and parses its summary.
package etcdbench

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// Workload is one invocation of the tool.
type Workload struct {
	Name    string   // stable name used in the report, e.g. "put-64"
	Args    []string // subcommand and its flags (endpoints/clients are added)
	Clients int
	Conns   int
	// Section is the summary to read: "Summary:" for put/range/txn-put,
	// "Watch events summary:" for watch-latency.
	Section string
	// Requests is how many requests the run sends (0: not fixed, e.g. a
	// rate-limited run), for per-request costs.
	Requests int
}

// Result is what one run of the tool measured. Latencies are in seconds.
type Result struct {
	Throughput float64 // requests per second
	Average    float64
	P50, P99   float64
}

// Run executes w against endpoint. It fails if the tool fails, if the
// summary is missing, or if any request returned an error.
func Run(ctx context.Context, bin, endpoint string, w Workload) (Result, string, error) {
	args := []string{"--endpoints", endpoint, "--precise",
		"--clients", strconv.Itoa(w.Clients), "--conns", strconv.Itoa(w.Conns)}
	args = append(args, w.Args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.Output() // stderr carries gRPC chatter and the progress bar
	text := string(out)
	if err != nil {
		return Result{}, text, fmt.Errorf("etcd benchmark %s against %s: %w (last output: %s)", w.Name, endpoint, err, tail(text))
	}
	r, err := Parse(text, w.Section)
	if err != nil {
		return Result{}, text, fmt.Errorf("etcd benchmark %s against %s: %w", w.Name, endpoint, err)
	}
	return r, text, nil
}

// Parse reads the summary called section from the tool's output.
func Parse(out, section string) (Result, error) {
	i := strings.Index(out, section)
	if i < 0 {
		return Result{}, fmt.Errorf("no %q in the output (last output: %s)", section, tail(out))
	}
	body := out[i+len(section):]
	// The next summary (if any) starts with a line ending in "summary:".
	if j := strings.Index(body, "summary:"); j >= 0 {
		body = body[:j]
	}
	if j := strings.Index(body, "Error distribution:"); j >= 0 {
		return Result{}, fmt.Errorf("requests failed: %s", strings.TrimSpace(firstLines(body[j:], 4)))
	}
	var r Result
	found := 0
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch {
		case f[0] == "Requests/sec:":
			r.Throughput, found = num(f[1]), found+1
		case f[0] == "Average:":
			r.Average, found = num(f[1]), found+1
		case f[0] == "50%" && len(f) >= 3:
			r.P50, found = num(f[2]), found+1
		case f[0] == "99%" && len(f) >= 3:
			r.P99, found = num(f[2]), found+1
		}
	}
	if found < 4 {
		return Result{}, fmt.Errorf("summary %q lacks throughput, average, p50 or p99 (got: %s)", section, tail(body))
	}
	return r, nil
}

func num(s string) float64 {
	v, _ := strconv.ParseFloat(strings.TrimSuffix(s, "."), 64)
	return v
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 400 {
		s = "…" + s[len(s)-400:]
	}
	return s
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " ")
}
