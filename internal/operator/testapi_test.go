package operator

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// testAPI is a real kube-apiserver on a real etcd, started for one test.
type testAPI struct {
	Config *rest.Config
	Client client.Client
	dir    string
}

// startTestAPI starts etcd (plain http on loopback) and kube-apiserver (a
// generated serving cert, a static admin token in system:masters) from the
// binaries named by QK_ETCD and QK_KUBE_APISERVER (`eval "$(scripts/deps.sh
// env etcd kube-apiserver)"`). Without them the test is skipped, or fails
// under CI=true. The CRD from deploy/generated/crd is installed.
func startTestAPI(t *testing.T) *testAPI {
	t.Helper()
	etcdBin, apiBin := os.Getenv("QK_ETCD"), os.Getenv("QK_KUBE_APISERVER")
	if etcdBin == "" || apiBin == "" {
		msg := `needs a real kube-apiserver and etcd: eval "$(scripts/deps.sh env kube-apiserver etcd)" then rerun`
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	etcdURL := "http://" + freeAddr(t)
	startProc(t, dir, "etcd", etcdBin,
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls=http://"+freeAddr(t),
		"--unsafe-no-fsync", "--log-level=warn")

	certFile, keyFile := servingCert(t, dir)
	saKey := filepath.Join(dir, "sa.key")
	writeRSAKey(t, saKey)
	token := "qk-test-admin-token"
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+",qk-admin,qk-admin,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	startProc(t, dir, "kube-apiserver", apiBin,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--secure-port="+port,
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--tls-cert-file="+certFile, "--tls-private-key-file="+keyFile,
		"--token-auth-file="+tokens,
		"--authorization-mode=RBAC",
		"--allow-privileged=true", // as kubeadm sets it: the host pods are privileged
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+saKey, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--endpoint-reconciler-type=none",
		"--shutdown-watch-termination-grace-period=1s",
		"--profiling=false")

	cfg := &rest.Config{Host: "https://" + addr, BearerToken: token, QPS: 200, Burst: 400,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	waitReady(t, cfg)
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := apiextv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	a := &testAPI{Config: cfg, Client: c, dir: dir}
	a.installCRDs(t)
	return a
}

// Waits of the test API server, each on a condition.
const (
	apiPoll         = 100 * time.Millisecond // CRDs, discovery, resets
	apiReadyPoll    = 300 * time.Millisecond // /readyz
	apiReadyTimeout = 90 * time.Second       // kube-apiserver and etcd starting on a loaded machine
	crdTimeout      = 30 * time.Second       // a CRD Established and served
)

func (a *testAPI) installCRDs(t *testing.T) {
	t.Helper()
	files, err := filepath.Glob("../../deploy/generated/crd/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRD in deploy/generated/crd (%v); run scripts/generate.sh", err)
	}
	ctx := context.Background()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
		if err := a.Client.Create(ctx, crd); err != nil {
			t.Fatalf("create CRD %s: %v", crd.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, apiPoll, crdTimeout, true, func(ctx context.Context) (bool, error) {
			got := &apiextv1.CustomResourceDefinition{}
			err := a.Client.Get(ctx, types.NamespacedName{Name: crd.Name}, got)
			return err == nil && established(got), nil
		})
		if err != nil {
			t.Fatalf("CRD %s not established after %v", crd.Name, crdTimeout)
		}
	}
	// A client's REST mapper knows the new kind once discovery serves it:
	// wait until a fresh client lists Installations.
	var last error
	err = wait.PollUntilContextTimeout(ctx, apiPoll, crdTimeout, true, func(ctx context.Context) (bool, error) {
		c, err := client.New(a.Config, client.Options{Scheme: a.Client.Scheme()})
		if err != nil {
			return false, err
		}
		if last = c.List(ctx, &v1.InstallationList{}); last != nil {
			return false, nil
		}
		a.Client = c
		return true, nil
	})
	if err != nil {
		t.Fatalf("Installations not served after %v: %v (last: %v)", crdTimeout, err, last)
	}
}

func established(crd *apiextv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue {
			return true
		}
	}
	return false
}

func waitReady(t *testing.T, cfg *rest.Config) {
	t.Helper()
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	last := "no answer"
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), apiReadyPoll, apiReadyTimeout, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/readyz", nil)
		if err != nil {
			return false, err
		}
		req.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
		resp, err := hc.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("kube-apiserver not ready after %v (last /readyz: %s)", apiReadyTimeout, last)
	}
	t.Logf("kube-apiserver ready in %v", time.Since(start).Round(time.Millisecond))
}

// startProc runs bin until the test ends; its output goes to dir/name.log,
// printed on failure.
func startProc(t *testing.T, dir, name, bin string, args ...string) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("kill %s: %v", name, err)
		}
		_ = cmd.Wait() // killed: its exit status is the signal
		logf.Close()
		if t.Failed() {
			data, err := os.ReadFile(logPath)
			if err != nil {
				t.Logf("read %s: %v", logPath, err)
			}
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(lines) > 20 {
				lines = lines[len(lines)-20:]
			}
			t.Logf("last lines of %s:\n%s", name, strings.Join(lines, "\n"))
		}
	})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// servingCert writes a self-signed serving certificate for 127.0.0.1.
func servingCert(t *testing.T, dir string) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

func writeRSAKey(t *testing.T, path string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, path, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(fmt.Errorf("write %s: %w", path, err))
	}
}
