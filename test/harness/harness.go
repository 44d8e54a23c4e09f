// Package harness lets Go tests drive a cluster made by scripts/kubeadm.sh:
// its API through client-go, its nodes through `scripts/kubeadm.sh exec`.
package harness

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster is a running scripts/kubeadm.sh cluster.
type Cluster struct {
	// Root is the repository root (where scripts/kubeadm.sh is).
	Root       string
	Kubeconfig string
	CS         *kubernetes.Clientset
}

// Connect opens the cluster of kubeconfig with a client allowing qps.
func Connect(t testing.TB, kubeconfig string, qps float32) *Cluster {
	t.Helper()
	c := &Cluster{Root: repoRoot(t), Kubeconfig: kubeconfig}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = qps, int(2*qps)
	if c.CS, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *Cluster) script(args ...string) *exec.Cmd {
	return exec.Command(filepath.Join(c.Root, "scripts", "kubeadm.sh"), args...)
}

// Exec runs a command as root in all of node's namespaces and returns its
// combined output.
func (c *Cluster) Exec(node string, args ...string) (string, error) {
	out, err := c.script(append([]string{"exec", node}, args...)...).CombinedOutput()
	return string(out), err
}

// MustExec is Exec that fails the test on error.
func (c *Cluster) MustExec(t testing.TB, node string, args ...string) string {
	t.Helper()
	out, err := c.Exec(node, args...)
	if err != nil {
		t.Fatalf("%s on %s: %v\n%s", strings.Join(args, " "), node, err, out)
	}
	return out
}

// Harness runs scripts/kubeadm.sh with args on the host and fails the test
// on error.
func (c *Cluster) Harness(t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.script(args...).CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/kubeadm.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// CopyIn installs the host file src at dst on node (mode 0755, atomically).
func (c *Cluster) CopyIn(t testing.TB, node, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	cmd := c.script("exec", node, "sh", "-c", "cat > "+dst+".tmp && chmod 755 "+dst+".tmp && mv "+dst+".tmp "+dst)
	cmd.Stdin = bytes.NewReader(data)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("copy %s into %s: %v\n%s", src, node, err, out)
	}
}

// repoRoot is the repository root: the nearest directory above the test's
// working directory (its package's, under go test) that holds go.mod. Not
// runtime.Caller: under -trimpath (CI builds so, as the image does) it
// gives an import path, not a file.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("the working directory: %v", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s: run the test with go test inside the repository", dir)
		}
	}
}
