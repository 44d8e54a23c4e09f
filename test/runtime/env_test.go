package runtimee2e

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/quantyroot/quantykube/scripts/critest/standin"
)

const (
	bridge = "qkcrit0"
	subnet = "10.231.77.0/24"
	// cgroupParent is the runtime's parent for pods without one.
	cgroupParent = "qkcritest"
)

// Named timeouts of the harness.
const (
	socketTimeout = 10 * time.Second // the runtime's socket after start
	pollInterval  = 100 * time.Millisecond
)

// env is the host environment of one test: binaries, directories, the registry.
type env struct {
	root, work, run string
	qk, runc, cni   string
	registry        string // host:port of the stand-in registry
	rt              *proc  // the runtime while it runs
}

// repoRoot is the repository root: the nearest directory above the test's
// working directory (its package's, under go test) that holds go.mod. Not
// runtime.Caller: under -trimpath (CI builds so, as the image does) it
// gives an import path, not a file.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(fmt.Sprintf("the working directory: %v", err))
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			panic("no go.mod above " + dir + ": run the test with go test inside the repository")
		}
	}
}

// need returns the values of the environment variables vars, or skips when one is missing
// or the test does not run as root. With QK_RUNTIME_REQUIRED=true (the wrapper scripts set
// it) it fails instead, so that a skip never passes for a run.
func need(t *testing.T, vars ...string) []string {
	t.Helper()
	var out, missing []string
	for _, v := range vars {
		out = append(out, os.Getenv(v))
		if os.Getenv(v) == "" {
			missing = append(missing, v)
		}
	}
	why := ""
	switch {
	case len(missing) > 0:
		why = fmt.Sprintf("%s not set: run %s, which gets them from scripts/deps.sh", strings.Join(missing, ", "), scriptOf(t))
	case os.Geteuid() != 0:
		why = "needs root (mounts, network namespaces, cgroups): run " + scriptOf(t) + " as root"
	default:
		return out
	}
	if os.Getenv("QK_RUNTIME_REQUIRED") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
	return nil
}

func scriptOf(t *testing.T) string {
	if strings.Contains(t.Name(), "Kubelet") {
		return "scripts/critest/kubelet.sh"
	}
	return "scripts/critest/restart.sh"
}

// newEnv prepares what scripts/critest/lib.sh's qk_setup prepares: the stand-in files, the
// registry (in-process here), the CNI config and the runtime config. It removes what a
// previous run may have left first, and registers the cleanup.
func newEnv(t *testing.T, runcBin, cniDir string) *env {
	t.Helper()
	e := &env{root: repoRoot(), runc: runcBin, cni: cniDir, run: os.Getenv("QK_CRITEST_RUN")}
	cache := os.Getenv("QK_CACHE")
	if cache == "" {
		// scripts/critest/lib.sh's default: the build cache outside the clone.
		dir, err := os.UserCacheDir()
		must(t, err)
		cache = filepath.Join(dir, "quantykube")
	}
	e.work = filepath.Join(cache, "critest")
	if e.run == "" {
		e.run = "/run/qkcritest"
	}
	must(t, os.MkdirAll(e.work, 0o755))
	e.qk = os.Getenv("QK_RUNTIME_BIN")
	if e.qk == "" {
		e.qk = filepath.Join(e.work, "quantykube")
		e.sh(t, "go", "build", "-o", e.qk, "./cmd/quantykube")
	}
	e.sh(t, filepath.Join(e.root, "scripts/critest/standins.sh"), filepath.Join(e.work, "standins"))
	e.cleanup(t)
	t.Cleanup(func() { e.cleanup(t) })
	e.saveIPForward(t)
	e.startRegistry(t)
	e.writeConfigs(t)
	return e
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// sh runs a command in the repository root and fails the test on error.
func (e *env) sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = e.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// startRegistry serves the stand-in images on a free loopback port until the test ends.
func (e *env) startRegistry(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	e.registry = l.Addr().String()
	n, err := standin.Push(e.registry, standin.InDir(filepath.Join(e.work, "standins")))
	must(t, err)
	t.Logf("stand-in registry on %s: %d repositories", e.registry, n)
}

func (e *env) socket() string { return filepath.Join(e.run, "rt.sock") }

// writeConfigs writes the CNI network (bridge + portmap) and the runtime's configuration.
func (e *env) writeConfigs(t *testing.T) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Join(e.run, "cni"), 0o755))
	must(t, os.MkdirAll(filepath.Join(e.work, "root"), 0o755))
	conflist := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"qkcritest","plugins":[
 {"type":"bridge","bridge":%q,"isGateway":true,"ipMasq":false,"hairpinMode":true,
  "ipam":{"type":"host-local","ranges":[[{"subnet":%q}]],"routes":[{"dst":"0.0.0.0/0"}],"dataDir":%q}},
 {"type":"portmap","capabilities":{"portMappings":true}}]}
`, bridge, subnet, filepath.Join(e.run, "ipam"))
	must(t, os.WriteFile(filepath.Join(e.run, "cni", "10-qkcritest.conflist"), []byte(conflist), 0o644))
	cfg := fmt.Sprintf("socket = %q\nstate_dir = %q\nroot_dir = %q\n", e.socket(), filepath.Join(e.run, "state"), filepath.Join(e.work, "root"))
	cfg += fmt.Sprintf("runc_path = %q\nrunc_root = %q\ncni_conf_dir = %q\ncni_bin_dirs = [%q]\ncni_cache_dir = %q\n",
		e.runc, filepath.Join(e.run, "runc"), filepath.Join(e.run, "cni"), e.cni, filepath.Join(e.run, "cni-cache"))
	cfg += fmt.Sprintf("pause_image = \"registry.k8s.io/pause:3.10.2\"\ncgroup_parent = \"/%s\"\nlog_level = \"info\"\n", cgroupParent)
	for _, h := range []string{"registry.k8s.io", "gcr.io", "k8s.gcr.io", "docker.io", "quay.io"} {
		cfg += fmt.Sprintf("[mirrors.%q]\nendpoints = [\"http://%s\"]\nskip_upstream = true\n", h, e.registry)
	}
	must(t, os.WriteFile(filepath.Join(e.run, "runtime.toml"), []byte(cfg), 0o644))
	must(t, os.WriteFile(filepath.Join(e.work, "runtime.log"), nil, 0o644))
}

// ctx is a context for one CRI call or wait.
func ctx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
