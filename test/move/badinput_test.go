package move

import (
	"strings"
	"testing"
	"time"
)

// TestBadInput: each refused install says what is wrong in one line and
// changes nothing (same manifest, same journal, no unit).
func TestBadInput(t *testing.T) {
	c := setup(t)
	if c.onStore(t) {
		c.mustNode(t, "quantykube", "undo", "store")
	}
	fingerprint := func() string {
		out, _ := c.node("sh", "-c", "sha256sum /etc/kubernetes/manifests/kube-apiserver.yaml; wc -c < /var/lib/quantykube/install/store/journal.jsonl 2>/dev/null; ls /etc/systemd/system/quantykube-store.service 2>&1; ls /tmp/qk-bad 2>&1")
		return out
	}
	c.mustNode(t, "sh", "-c", `rm -rf /tmp/qk-bad && mkdir -p /tmp/qk-bad/empty /tmp/qk-bad/dead &&
		sed 's#--etcd-servers=.*#--etcd-servers=https://127.0.0.1:1#' /etc/kubernetes/manifests/kube-apiserver.yaml > /tmp/qk-bad/dead/kube-apiserver.yaml`)
	cases := []struct {
		name string
		cmd  []string
		want string
	}{
		{"not root", []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "quantykube", "install", "store"}, "must run as root"},
		{"not a kubeadm node", []string{"quantykube", "install", "store", "--manifests", "/tmp/qk-bad/empty"}, "not a kubeadm control-plane node"},
		{"etcd unreachable", []string{"quantykube", "install", "store", "--manifests", "/tmp/qk-bad/dead"}, "does not answer"},
		{"certificates missing", []string{"quantykube", "install", "store", "--pki", "/tmp/qk-bad/empty"}, "is missing"},
		{"port 2479 taken", []string{"sh", "-c", "socat TCP-LISTEN:2479,bind=127.0.0.1,reuseaddr,fork /dev/null & p=$!; sleep 0.5; quantykube install store; rc=$?; kill $p; exit $rc"}, "port 2479"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := fingerprint()
			out, err := c.node(tc.cmd...)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Fatalf("want a refusal containing %q, got err %v:\n%s", tc.want, err, out)
			}
			if lines := strings.Count(strings.TrimSpace(out), "\n") + 1; lines > 2 {
				t.Errorf("the error takes %d lines, want one:\n%s", lines, out)
			}
			if after := fingerprint(); after != before {
				t.Fatalf("a refused install changed the node:\nbefore %s\nafter  %s", before, after)
			}
			t.Logf("refused: %s", strings.TrimSpace(out))
		})
	}
	t.Run("second install while one runs", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, err := c.node("quantykube", "install", "store")
			done <- err
		}()
		c.EventuallyLocked(t, c.cp, "/var/lib/quantykube/install/store/lock", 20*time.Second)
		out, err := c.node("quantykube", "install", "store")
		if err == nil || !strings.Contains(out, "another quantykube install or undo is running") {
			t.Fatalf("a second install was not refused: err %v\n%s", err, out)
		}
		t.Logf("refused: %s", strings.TrimSpace(out))
		if err := <-done; err != nil {
			t.Fatalf("the first install failed: %v", err)
		}
		c.serving(t)
		c.mustNode(t, "quantykube", "undo", "store")
		c.settle(t)
	})
}
