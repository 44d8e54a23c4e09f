package storee2e

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Environment variables naming the binaries the tests run. A binary that is not
// named (or not executable) makes the test skip, except under CI=true, where it
// fails: CI must provide everything.
const (
	envStoreCmd      = "QK_STORE_CMD"      // "store" (default) or "etcd"
	envStoreBin      = "QK_STORE_BIN"      // the quantykube binary
	envEtcd          = "QK_ETCD"           // etcd 3.6
	envEtcdctl       = "QK_ETCDCTL"        // etcdctl 3.6
	envEtcdutl       = "QK_ETCDUTL"        // etcdutl 3.6
	envKubeAPIServer = "QK_KUBE_APISERVER" // kube-apiserver v1.36
	envKubeCM        = "QK_KUBE_CONTROLLER_MANAGER"
	envKubectl       = "QK_KUBECTL" // default /usr/bin/kubectl
)

// defaultKubectl is the kubectl of the machine image.
const defaultKubectl = "/usr/bin/kubectl"

// inCI reports whether missing prerequisites must fail rather than skip.
func inCI() bool { return os.Getenv("CI") == "true" }

// missing skips the test (or fails it under CI=true) with a message naming
// what is missing and how to provide it.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if inCI() {
		t.Fatalf("CI=true and %s", msg)
	}
	t.Skip(msg)
}

// binary returns the executable named by env (or def when env is unset), or
// skips/fails the test when there is none. how tells the reader how to get it.
func binary(t testing.TB, env, def, how string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = def
	}
	if p == "" {
		missing(t, "%s is not set; %s", env, how)
		return ""
	}
	lp, err := exec.LookPath(p)
	if err != nil {
		missing(t, "%s=%q is not an executable (%v); %s", env, p, err, how)
		return ""
	}
	return lp
}

func etcdctlBin(t testing.TB) string {
	return binary(t, envEtcdctl, "", "set it to the output of `scripts/deps.sh path etcdctl`")
}

func etcdutlBin(t testing.TB) string {
	return binary(t, envEtcdutl, "", "set it to the output of `scripts/deps.sh path etcdutl`")
}

func kubeAPIServerBin(t testing.TB) string {
	return binary(t, envKubeAPIServer, "", "set it to the output of `scripts/deps.sh path kube-apiserver`")
}

func kubeControllerManagerBin(t testing.TB) string {
	return binary(t, envKubeCM, "", "set it to the output of `scripts/deps.sh path kube-controller-manager`")
}

func kubectlBin(t testing.TB) string {
	return binary(t, envKubectl, defaultKubectl, "install kubectl or set QK_KUBECTL to one")
}

// serverKind is the server under test: "store" or "etcd".
func serverKind(t testing.TB) string {
	t.Helper()
	switch k := os.Getenv(envStoreCmd); k {
	case "", "store":
		return "store"
	case "etcd":
		return "etcd"
	default:
		t.Fatalf("%s=%q is not a server kind; set it to store or etcd", envStoreCmd, k)
		return ""
	}
}

// serverBin returns the binary of the server under test.
func serverBin(t testing.TB, kind string) string {
	if kind == "etcd" {
		return binary(t, envEtcd, "", "set it to the output of `scripts/deps.sh path etcd`")
	}
	return binary(t, envStoreBin, "", "build it with `go build -o /tmp/quantykube ./cmd/quantykube` and set QK_STORE_BIN=/tmp/quantykube (or QK_STORE_CMD=etcd with QK_ETCD)")
}
