package etcdbench

import (
	"strings"
	"testing"
)

const putOutput = `
Summary:
  Total:	0.5379 secs.
  Slowest:	0.0615 secs.
  Fastest:	0.0006 secs.
  Average:	0.0068 secs.
  Stddev:	0.0098 secs.
  Requests/sec:	9295.1158

Response time histogram:
  0.0006 [1]	|
  0.0615 [64]	|

Latency distribution:
  10% in 0.0022 secs.
  50% in 0.0035 secs.
  99% in 0.0599 secs.
  99.9% in 0.0613 secs.
`

func TestParseSummary(t *testing.T) {
	r, err := Parse(putOutput, "Summary:")
	if err != nil {
		t.Fatal(err)
	}
	want := Result{Throughput: 9295.1158, Average: 0.0068, P50: 0.0035, P99: 0.0599}
	if r != want {
		t.Fatalf("Parse = %+v, want %+v", r, want)
	}
}

func TestParseWatchSectionSkipsPutSummary(t *testing.T) {
	out := "\nPut summary:\n" + putOutput + "\nWatch events summary:\n" +
		strings.NewReplacer("9295.1158", "100.5", "0.0035", "0.0002", "0.0599", "0.0019").Replace(putOutput)
	r, err := Parse(out, "Watch events summary:")
	if err != nil {
		t.Fatal(err)
	}
	if r.Throughput != 100.5 || r.P50 != 0.0002 || r.P99 != 0.0019 {
		t.Fatalf("Parse read the wrong section: %+v", r)
	}
}

func TestParseFailsOnErrors(t *testing.T) {
	out := putOutput + "\nError distribution:\n  [10]\trpc error: code = InvalidArgument desc = etcdserver: unsupported operations in txn request\n"
	if _, err := Parse(out, "Summary:"); err == nil || !strings.Contains(err.Error(), "unsupported operations") {
		t.Fatalf("Parse with an error distribution = %v, want an error naming it", err)
	}
}

func TestParseFailsWithoutSummary(t *testing.T) {
	if _, err := Parse("panic: boom", "Summary:"); err == nil {
		t.Fatal("Parse without a summary succeeded")
	}
}
