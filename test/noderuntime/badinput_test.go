package noderuntime

import (
	"strings"
	"testing"
	"time"
)

// TestBadInput: each refused install says what is wrong in one line and
// changes nothing (the kubelet's files, containerd, the journal, no unit).
func TestBadInput(t *testing.T) {
	c := setup(t)
	w := c.worker
	c.onContainerd(t, w)
	defer c.quiet(t, w)()
	print := func() string {
		out, _ := c.node(w, "sh", "-c", "wc -c < /var/lib/quantykube/install/runtime/journal.jsonl 2>/dev/null; ls /etc/systemd/system/quantykube-runtime.service 2>&1")
		return c.fingerprint(t, w) + out
	}
	c.mustNode(t, w, "sh", "-c", `rm -rf /tmp/qk-bad && mkdir -p /tmp/qk-bad/overlay &&
		sed 's/^cgroupDriver:.*/cgroupDriver: magic/' /var/lib/kubelet/config.yaml > /tmp/qk-bad/magic.yaml &&
		printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n' > /tmp/qk-bad/pod.yaml &&
		printf 'root_dir = "/tmp/qk-bad/overlay/root"\n' > /tmp/qk-bad/overlay.toml`)
	// /tmp is a tmpfs in the nodes: give the overlay case a real overlay.
	c.mustNode(t, w, "sh", "-c", `mkdir -p /tmp/qk-bad/l /tmp/qk-bad/u /tmp/qk-bad/wk && mount -t overlay overlay -o lowerdir=/tmp/qk-bad/l,upperdir=/tmp/qk-bad/u,workdir=/tmp/qk-bad/wk /tmp/qk-bad/overlay`)
	defer c.node(w, "umount", "/tmp/qk-bad/overlay")
	c.drain(t, w)
	cases := []struct {
		name string
		cmd  []string
		want string
	}{
		{"not root", []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "quantykube", "install", "runtime"}, "must run as root"},
		{"runtime binary missing", []string{"quantykube", "install", "runtime", "--binary", "/nonexistent/quantykube"}, "binary /nonexistent/quantykube is missing"},
		{"kubelet config not found", []string{"quantykube", "install", "runtime", "--kubelet-config", "/tmp/qk-bad/none.yaml"}, "not found"},
		{"kubelet config not kubeadm's", []string{"quantykube", "install", "runtime", "--kubelet-config", "/tmp/qk-bad/pod.yaml"}, "not a KubeletConfiguration"},
		{"cgroup driver unknown", []string{"quantykube", "install", "runtime", "--kubelet-config", "/tmp/qk-bad/magic.yaml"}, `cgroup driver "magic"`},
		{"root dir on overlayfs", []string{"quantykube", "install", "runtime", "--runtime-config", "/tmp/qk-bad/overlay.toml"}, "on overlayfs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { c.refused(t, tc.cmd, tc.want, print) })
	}
	t.Run("node not drained", func(t *testing.T) {
		c.kubectl(t, "uncordon", w)
		c.workload(t, w, 1)
		defer c.deleteWorkload(t)
		c.podsRunOn(t, "app=nr-web", w, "containerd", 1)
		c.refused(t, []string{"quantykube", "install", "runtime"}, "is not drained", print)
	})
	c.drain(t, w)
	defer c.kubectl(t, "uncordon", w)
	t.Run("second install while one runs", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, err := c.node(w, installArgs...)
			done <- err
		}()
		c.EventuallyLocked(t, w, "/var/lib/quantykube/install/runtime/lock", 30*time.Second)
		out, err := c.node(w, installArgs...)
		if e := <-done; e != nil {
			t.Fatalf("the first install failed: %v", e)
		}
		if err == nil || !strings.Contains(out, "another quantykube install or undo is running") {
			t.Fatalf("a second install was not refused: err %v\n%s", err, out)
		}
		t.Logf("refused: %s", strings.TrimSpace(out))
		c.mustNode(t, w, "quantykube", "undo", "runtime")
		c.readyOn(t, w, "containerd")
	})
}

// refused runs cmd on the worker and wants a one-line error containing want
// and no change.
func (c *cluster) refused(t *testing.T, cmd []string, want string, print func() string) {
	t.Helper()
	before := print()
	out, err := c.node(c.worker, cmd...)
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("want a refusal containing %q, got err %v:\n%s", want, err, out)
	}
	if lines := strings.Count(strings.TrimSpace(out), "\n") + 1; lines > 1 {
		t.Errorf("the error takes %d lines, want one:\n%s", lines, out)
	}
	if after := print(); after != before {
		t.Fatalf("a refused install changed the node:\nbefore %s\nafter  %s", before, after)
	}
	t.Logf("refused: %s", strings.TrimSpace(out))
}
