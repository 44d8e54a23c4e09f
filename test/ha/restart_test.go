package ha

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quantyroot/quantykube/test/harness"
)

const (
	manifest = "/etc/kubernetes/manifests/kube-apiserver.yaml"
	// parked is where a stopped API server's manifest waits: outside the
	// manifests directory, on the same filesystem, so moves are renames
	// (kubelet never reads a half-written manifest: pitfall 11).
	parked = "/etc/kubernetes/qk-ha-kube-apiserver.yaml"
	// restartLimit bounds one API server's stop or start (a loaded machine
	// takes tens of seconds to start kube-apiserver).
	restartLimit = 3 * time.Minute
)

// TestAPIServersRestartOneAtATime restarts each control plane's API server
// in turn while a client on the load balancer reads and writes a ConfigMap
// every 100 ms, and logs how long each kind of call went without a success.
// With one API server of three down at a time, the load balancer should route
// every new connection to a ready one: the test fails only when a gap
// exceeds QK_HA_MAX_GAP (default 5s), an LB that does not route around a
// stopped server; the figures are what it is for.
func TestAPIServersRestartOneAtATime(t *testing.T) {
	c := setup(t)
	for _, cp := range c.cps {
		c.eventuallyServing(t, cp)
	}
	ctx := context.Background()
	p, err := harness.StartProber(ctx, c.CS, "default", "qk-ha-probe", harness.ProbeInterval, harness.ProbeTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CS.CoreV1().ConfigMaps("default").Delete(ctx, "qk-ha-probe", metav1.DeleteOptions{}) })
	// A quiet stretch before and after: the figures of an undisturbed API to
	// compare with (a measured period, not a wait for a condition).
	time.Sleep(3 * time.Second)
	var spans []span
	for round := 1; round <= rounds(t); round++ {
		for _, cp := range c.cps {
			spans = append(spans, c.restart(t, cp))
		}
	}
	time.Sleep(3 * time.Second)
	a := p.Stop()
	t.Logf("availability through %s while %d API servers restarted one at a time (%d round(s)), %v:", c.lb, len(c.cps), rounds(t), a.Duration.Round(time.Millisecond))
	t.Log(a.Reads)
	t.Log(a.Writes)
	t.Logf("the longest read gap ended %s; the longest write gap %s", during(spans, a.Reads.GapEnd), during(spans, a.Writes.GapEnd))
	t.Log(verdict(a))
	limit := maxGap(t)
	for _, s := range []harness.Series{a.Reads, a.Writes} {
		if s.LongestGap > limit {
			t.Errorf("%s: longest gap %v > QK_HA_MAX_GAP %v: the load balancer did not keep the API answering", s.Kind, s.LongestGap.Round(time.Millisecond), limit)
		}
	}
}

// verdict is the one-line summary: "reads never failed; longest write gap X".
func verdict(a harness.Availability) string {
	part := func(s harness.Series) string {
		if s.Failed == 0 {
			return fmt.Sprintf("%s never failed (longest gap %v)", s.Kind, s.LongestGap.Round(time.Millisecond))
		}
		return fmt.Sprintf("%s failed %d times in %d window(s), longest window %v, longest gap %v", s.Kind, s.Failed,
			len(s.Windows), s.LongestWindow().Round(time.Millisecond), s.LongestGap.Round(time.Millisecond))
	}
	return part(a.Reads) + "; " + part(a.Writes)
}

// span is one API server's restart: from its manifest moved out to its
// server UP in the load balancer again.
type span struct {
	cp         string
	start, end time.Time
}

// during names the restart that was under way at instant at, if any.
func during(spans []span, at time.Time) string {
	for _, s := range spans {
		if !at.Before(s.start) && !at.After(s.end) {
			return fmt.Sprintf("during %s's restart (+%v into it)", s.cp, at.Sub(s.start).Round(time.Millisecond))
		}
	}
	return "outside every restart"
}

// restart stops cp's API server (its manifest moved out of the manifests
// directory), waits until it is gone, puts the manifest back and waits until
// it is ready and back in the load balancer's rotation; it logs each step's time.
func (c *cluster) restart(t *testing.T, cp controlCP) span {
	t.Helper()
	t.Cleanup(func() { _, _ = c.Exec(cp.name, "sh", "-c", "test -e "+parked+" && mv "+parked+" "+manifest) })
	t0 := time.Now()
	c.MustExec(t, cp.name, "mv", manifest, parked)
	var lbOut time.Duration
	harness.Eventually(t, cp.name+"'s kube-apiserver to stop", restartLimit, func(ctx context.Context) error {
		if lbOut == 0 && c.lbState(cp.name) != "UP" {
			lbOut = time.Since(t0)
		}
		if err := readyz(ctx, cp); err == nil {
			return fmt.Errorf("/readyz still answers ok")
		}
		out, err := c.Exec(cp.name, "crictl", "ps", "-q", "--name", "^kube-apiserver$")
		if err != nil || strings.TrimSpace(out) != "" {
			return fmt.Errorf("container still running (%q, %v)", strings.TrimSpace(out), err)
		}
		return nil
	})
	stopped := time.Since(t0)
	t1 := time.Now()
	c.MustExec(t, cp.name, "mv", parked, manifest)
	harness.Eventually(t, cp.name+"'s kube-apiserver to be ready again", restartLimit, func(ctx context.Context) error { return readyz(ctx, cp) })
	ready := time.Since(t1)
	harness.Eventually(t, cp.name+" back UP in the load balancer", restartLimit, func(context.Context) error {
		if s := c.lbState(cp.name); s != "UP" {
			return fmt.Errorf("haproxy says %q", s)
		}
		return nil
	})
	t.Logf("%s: out of the LB's rotation after %v, stopped after %v; ready %v after its manifest came back, UP in the LB %v later",
		cp.name, lbOut.Round(time.Millisecond), stopped.Round(time.Millisecond), ready.Round(time.Millisecond), (time.Since(t1) - ready).Round(time.Millisecond))
	return span{cp: cp.name, start: t0, end: time.Now()}
}

// eventuallyServing waits until cp's API server is ready and UP in the LB.
func (c *cluster) eventuallyServing(t *testing.T, cp controlCP) {
	t.Helper()
	harness.Eventually(t, cp.name+" serving behind "+c.lb, restartLimit, func(ctx context.Context) error {
		if err := readyz(ctx, cp); err != nil {
			return err
		}
		if s := c.lbState(cp.name); s != "UP" {
			return fmt.Errorf("haproxy says %q", s)
		}
		return nil
	})
}

// readyz is nil when cp's own API server answers /readyz with 200.
func readyz(ctx context.Context, cp controlCP) error {
	_, err := cp.direct.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Raw()
	return err
}

// lbState is haproxy's status of server name ("UP", "DOWN", "UP 1/2", ...),
// from its stats socket; "" when it cannot be read.
func (c *cluster) lbState(name string) string {
	out, err := c.Exec(c.lb, "sh", "-c", `echo "show stat" | socat - UNIX-CONNECT:/run/haproxy/admin.sock`)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Split(line, ","); len(f) > 17 && f[0] == "kube-apiservers" && f[1] == name {
			return f[17]
		}
	}
	return ""
}

func rounds(t *testing.T) int {
	n, err := strconv.Atoi(envOr("QK_HA_ROUNDS", "1"))
	if err != nil || n < 1 {
		t.Fatalf("QK_HA_ROUNDS=%q: want a count of at least 1, e.g. QK_HA_ROUNDS=2", os.Getenv("QK_HA_ROUNDS"))
	}
	return n
}

func maxGap(t *testing.T) time.Duration {
	d, err := time.ParseDuration(envOr("QK_HA_MAX_GAP", "5s"))
	if err != nil || d <= 0 {
		t.Fatalf("QK_HA_MAX_GAP=%q: want a duration, e.g. QK_HA_MAX_GAP=5s", os.Getenv("QK_HA_MAX_GAP"))
	}
	return d
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
