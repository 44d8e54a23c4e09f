package runtimemove

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeKubelet(t *testing.T, cfg, flags string) Paths {
	t.Helper()
	d := t.TempDir()
	p := DefaultPaths()
	p.KubeletConfig, p.KubeletFlags, p.DropInDirs = filepath.Join(d, "config.yaml"), filepath.Join(d, "flags.env"), nil
	os.WriteFile(p.KubeletConfig, []byte(cfg), 0o644)
	if flags != "" {
		os.WriteFile(p.KubeletFlags, []byte(flags), 0o644)
	}
	return p
}

func TestSwitchInConfig(t *testing.T) {
	p := writeKubelet(t, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\ncontainerRuntimeEndpoint: unix:///run/containerd/containerd.sock\nfailCgroupV1: false\n",
		`KUBELET_KUBEADM_ARGS="--node-ip=1.2.3.4"`+"\n")
	k, err := p.readKubelet()
	if err != nil {
		t.Fatal(err)
	}
	if k.Endpoint != "unix:///run/containerd/containerd.sock" || k.EndpointInFlags || k.CgroupDriver != "systemd" || k.FailCgroupV1 {
		t.Fatalf("got %+v", k)
	}
	cfg, flags := k.switched("unix:///run/quantykube/runtime.sock")
	want := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: cgroupfs\ncontainerRuntimeEndpoint: unix:///run/quantykube/runtime.sock\nfailCgroupV1: false\n"
	if string(cfg) != want || string(flags) != string(k.flags) {
		t.Fatalf("config:\n%s\nflags: %s", cfg, flags)
	}
}

func TestSwitchInFlags(t *testing.T) {
	p := writeKubelet(t, "kind: KubeletConfiguration\n",
		`KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock --node-ip=1.2.3.4"`+"\n")
	k, err := p.readKubelet()
	if err != nil {
		t.Fatal(err)
	}
	if !k.EndpointInFlags || k.CgroupDriver != "cgroupfs" {
		t.Fatalf("got %+v", k)
	}
	cfg, flags := k.switched("unix:///run/quantykube/runtime.sock")
	if string(cfg) != "kind: KubeletConfiguration\n" {
		t.Fatalf("config changed: %s", cfg)
	}
	if !strings.Contains(string(flags), `"--container-runtime-endpoint=unix:///run/quantykube/runtime.sock --node-ip=1.2.3.4"`) {
		t.Fatalf("flags: %s", flags)
	}
}

func TestBadKubelet(t *testing.T) {
	for _, tc := range []struct{ cfg, flags, want string }{
		{"kind: KubeletConfiguration\ncgroupDriver: magic\ncontainerRuntimeEndpoint: unix:///x\n", "", "cgroup driver \"magic\""},
		{"kind: KubeletConfiguration\n", "", "runtime endpoint is not known"},
		{"kind: Pod\n", "", "not a KubeletConfiguration"},
		{"kind: KubeletConfiguration\ncontainerRuntimeEndpoint: tcp://x\n", "", "not a unix://"},
	} {
		_, err := writeKubelet(t, tc.cfg, tc.flags).readKubelet()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.cfg, err, tc.want)
		}
	}
	p := DefaultPaths()
	p.KubeletConfig = "/nonexistent/config.yaml"
	if _, err := p.readKubelet(); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing config: %v", err)
	}
}
