package noderuntime

import (
	"strings"
	"testing"
)

var (
	installSteps = []string{"carry-registries", "start-runtime", "prepull", "stop-kubelet", "remove-old-pods", "switch-kubelet", "start-kubelet"}
	undoSteps    = []string{"stop-kubelet", "remove-new-pods", "restore-kubelet", "start-kubelet", "stop-runtime"}
	// afterCommit are the steps that follow a plan's commit step.
	afterCommit = map[string]bool{"stop-runtime": true}
)

// TestFaults injects a failure into every step of install and undo on the
// drained worker, and kills the command with SIGKILL at the start of every
// step; after each, the node is Ready on one runtime, the next run completes
// or rolls back, and containerd's state is never changed.
func TestFaults(t *testing.T) {
	c := setup(t)
	w := c.worker
	c.onContainerd(t, w)
	defer c.quiet(t, w)()
	// A DaemonSet pod stays through the drain: it moves with every run.
	c.workload(t, w, 1)
	defer c.deleteWorkload(t)
	c.podsRunOn(t, "app=nr-agent", w, "containerd", 1)
	c.drain(t, w)
	defer c.kubectl(t, "uncordon", w)
	before := c.fingerprint(t, w)
	unitInactive := func(t *testing.T) {
		t.Helper()
		if out, err := c.node(w, "systemctl", "is-active", "quantykube-runtime"); err == nil {
			t.Fatalf("quantykube-runtime is still active: %s", out)
		}
	}
	for _, step := range installSteps {
		t.Run("install/fail/"+step, func(t *testing.T) {
			out, err := c.node(w, append([]string{"env", "QK_INSTALL_FAIL=install:" + step}, installArgs...)...)
			if err == nil || !strings.Contains(out, `step "`+step+`" failed`) || !strings.Contains(out, "put back") {
				t.Fatalf("install with %s failing: err %v\n%s", step, err, out)
			}
			c.readyOn(t, w, "containerd")
			c.podsRunOn(t, "app=nr-agent", w, "containerd", 1)
			unitInactive(t)
			if after := c.fingerprint(t, w); after != before {
				t.Fatalf("a failed install left a change:\nbefore %s\nafter  %s", before, after)
			}
		})
		t.Run("install/kill/"+step, func(t *testing.T) {
			if out, err := c.node(w, append([]string{"env", "QK_INSTALL_KILL=install:" + step + ":begin"}, installArgs...)...); err == nil {
				t.Fatalf("install was not killed at %s:\n%s", step, out)
			}
			out := c.mustNode(t, w, installArgs...)
			if !strings.Contains(out, "interrupted install was") {
				t.Fatalf("the rerun did not recover the interrupted install:\n%s", out)
			}
			c.readyOn(t, w, "quantykube")
			c.podsRunOn(t, "app=nr-agent", w, "quantykube", 1)
			c.mustNode(t, w, "quantykube", "undo", "runtime")
			c.readyOn(t, w, "containerd")
			c.podsRunOn(t, "app=nr-agent", w, "containerd", 1)
			if after := c.fingerprint(t, w); after != before {
				t.Fatalf("install+undo after a kill left a change:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	for _, step := range undoSteps {
		t.Run("undo/fail/"+step, func(t *testing.T) {
			c.mustNode(t, w, installArgs...)
			out, err := c.node(w, "env", "QK_INSTALL_FAIL=undo:"+step, "quantykube", "undo", "runtime")
			if err == nil || !strings.Contains(out, `step "`+step+`" failed`) {
				t.Fatalf("undo with %s failing: err %v\n%s", step, err, out)
			}
			if afterCommit[step] {
				if !strings.Contains(out, "rerun the command to finish") {
					t.Fatalf("a failure after the commit step was rolled back:\n%s", out)
				}
				c.readyOn(t, w, "containerd")
				c.podsRunOn(t, "app=nr-agent", w, "containerd", 1)
				out = c.mustNode(t, w, "quantykube", "undo", "runtime")
				if !strings.Contains(out, "interrupted undo was finished") {
					t.Fatalf("the rerun did not finish the undo:\n%s", out)
				}
			} else {
				c.readyOn(t, w, "quantykube")
				c.podsRunOn(t, "app=nr-agent", w, "quantykube", 1)
				c.mustNode(t, w, "quantykube", "undo", "runtime")
			}
			c.readyOn(t, w, "containerd")
			c.podsRunOn(t, "app=nr-agent", w, "containerd", 1)
			unitInactive(t)
			if after := c.fingerprint(t, w); after != before {
				t.Fatalf("undo left a change:\nbefore %s\nafter  %s", before, after)
			}
		})
		t.Run("undo/kill/"+step, func(t *testing.T) {
			c.mustNode(t, w, installArgs...)
			if out, err := c.node(w, "env", "QK_INSTALL_KILL=undo:"+step+":begin", "quantykube", "undo", "runtime"); err == nil {
				t.Fatalf("undo was not killed at %s:\n%s", step, out)
			}
			out := c.mustNode(t, w, "quantykube", "undo", "runtime")
			if !strings.Contains(out, "interrupted undo was") {
				t.Fatalf("the rerun did not recover the interrupted undo:\n%s", out)
			}
			c.readyOn(t, w, "containerd")
			c.podsRunOn(t, "app=nr-agent", w, "containerd", 1)
			unitInactive(t)
			if after := c.fingerprint(t, w); after != before {
				t.Fatalf("undo after a kill left a change:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}
