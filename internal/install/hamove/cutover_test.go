package hamove

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// Right after the last switch, kubelet's mirror pods lag: one API server
// pod missing, then one still showing etcd, then all on the store. The
// cut-over's preflight waits for them instead of refusing (CI stage 3 once
// refused, and the move rolled back).
func TestCutoverPreflightWaitsForMirrorPods(t *testing.T) {
	store, etcd := "https://127.0.0.1:2479", "https://127.0.0.1:2379"
	seq := []map[string]string{
		{"cp1": store, "cp2": store},
		{"cp1": store, "cp2": store, "cp3": etcd},
		{"cp1": store, "cp2": store, "cp3": store},
	}
	calls := 0
	var out bytes.Buffer
	n := &Node{Paths: Paths{Loopback: "127.0.0.1", ClientPort: "2479"}, Out: &out, APIServersWait: apiServersWait,
		APIServers: func(context.Context) (map[string]string, error) {
			m := seq[min(calls, len(seq)-1)]
			calls++
			return m, nil
		}}
	start := time.Now()
	if err := n.waitAPIServersOnStore(context.Background(), 3); err != nil {
		t.Fatalf("waitAPIServersOnStore: %v", err)
	}
	if calls != len(seq) {
		t.Fatalf("%d reads of the API server pods, want %d", calls, len(seq))
	}
	if !strings.Contains(out.String(), "2 API server pods found for 3 control-plane nodes") {
		t.Fatalf("output %q does not say what it waits for", out.String())
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v", d)
	}

	// An API server that stays on etcd is refused with the reason once the
	// wait (n.APIServersWait) ends.
	n.APIServers = func(context.Context) (map[string]string, error) { return seq[1], nil }
	n.APIServersWait = 1500 * time.Millisecond
	if err := n.waitAPIServersOnStore(context.Background(), 3); err == nil || !strings.Contains(err.Error(), "still on etcd: cp3") {
		t.Fatalf("an API server staying on etcd: %v, want its refusal", err)
	}
	if err := n.apiServersOnStore(context.Background(), 3); err == nil || !strings.Contains(err.Error(), "API servers still on etcd: cp3 (https://127.0.0.1:2379)") {
		t.Fatalf("apiServersOnStore = %v", err)
	}
}
