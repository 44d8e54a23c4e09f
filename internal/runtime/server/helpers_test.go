package server

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/images"
	"github.com/quantyroot/quantykube/internal/runtime/store"
)

func TestGrpcErrCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{fmt.Errorf("x: %w", store.ErrNotFound), codes.NotFound},
		{fmt.Errorf("x: %w", store.ErrNameInUse), codes.AlreadyExists},
		{fmt.Errorf("pull: %w", images.ErrNotFound), codes.NotFound},
		{invalid("bad"), codes.InvalidArgument},
		{errors.New("boom"), codes.Unknown},
	} {
		if got := status.Code(grpcErr(tc.err)); got != tc.code {
			t.Errorf("%v: code %v, want %v", tc.err, got, tc.code)
		}
	}
	if grpcErr(nil) != nil {
		t.Fatal("nil error mapped to non-nil")
	}
}

func TestMatchLabelsAndPrefix(t *testing.T) {
	l := map[string]string{"a": "1", "b": "2"}
	if !matchLabels(l, nil) || !matchLabels(l, map[string]string{"a": "1"}) || matchLabels(l, map[string]string{"a": "2"}) {
		t.Fatal("label selector")
	}
	if !hasPrefix("abcdef", "abc") || hasPrefix("ab", "abc") {
		t.Fatal("prefix")
	}
}

func TestSignalNumber(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"SIGQUIT": syscall.SIGQUIT, "TERM": syscall.SIGTERM} {
		if got, ok := signalNumber(in); !ok || got != want {
			t.Errorf("%s: %v %v", in, got, ok)
		}
	}
	if _, ok := signalNumber("SIGNOPE"); ok {
		t.Fatal("unknown signal accepted")
	}
}

func TestSandboxFilesDNSAndHosts(t *testing.T) {
	dir := t.TempDir()
	f := sandboxFiles(dir, true)
	cfg := &runtimeapi.PodSandboxConfig{Hostname: "pod-a", DnsConfig: &runtimeapi.DNSConfig{
		Servers: []string{"10.10.10.10"}, Searches: []string{"google.com"}, Options: []string{"ndots:8"}}}
	if err := writePodFiles(f, cfg, false, "10.1.2.3"); err != nil {
		t.Fatal(err)
	}
	rc, _ := os.ReadFile(f.ResolvConf)
	if string(rc) != "nameserver 10.10.10.10\nsearch google.com\noptions ndots:8\n" {
		t.Fatalf("resolv.conf %q", rc)
	}
	h, _ := os.ReadFile(f.Hosts)
	if !strings.Contains(string(h), "10.1.2.3\tpod-a\n") || !strings.Contains(string(h), "127.0.0.1\tlocalhost") {
		t.Fatalf("hosts %q", h)
	}
	hn, _ := os.ReadFile(f.Hostname)
	if string(hn) != "pod-a\n" {
		t.Fatalf("hostname %q", hn)
	}
	if f.Shm != "" {
		t.Fatal("host IPC sandbox got its own shm")
	}
}
