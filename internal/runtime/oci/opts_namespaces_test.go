package oci

import (
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func nsList(s *specs.Spec) map[specs.LinuxNamespaceType]string {
	out := map[specs.LinuxNamespaceType]string{}
	for _, n := range s.Linux.Namespaces {
		out[n.Type] = n.Path
	}
	return out
}

func TestWithSandboxNamespaces(t *testing.T) {
	s := apply(t, WithHostname("pod"), WithSandboxNamespaces(Namespaces{NetNS: "/n"}, nil))
	got := nsList(s)
	if len(got) != 5 || got[specs.NetworkNamespace] != "/n" || s.Hostname != "pod" {
		t.Fatalf("pod namespaces %v hostname %q", got, s.Hostname)
	}
	node := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Ipc: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_NODE}
	s = apply(t, WithHostname("pod"), WithSandboxNamespaces(Namespaces{HostNet: true}, node))
	if got := nsList(s); len(got) != 1 || s.Hostname != "" {
		t.Fatalf("host namespaces %v hostname %q", got, s.Hostname)
	}
}

func TestWithContainerNamespaces(t *testing.T) {
	pod := Namespaces{NetNS: "/n", PausePid: 42, TargetPid: 77}
	for _, tc := range []struct {
		mode runtimeapi.NamespaceMode
		pid  string
		has  bool
	}{
		{runtimeapi.NamespaceMode_POD, "/proc/42/ns/pid", true},
		{runtimeapi.NamespaceMode_TARGET, "/proc/77/ns/pid", true},
		{runtimeapi.NamespaceMode_CONTAINER, "", true},
		{runtimeapi.NamespaceMode_NODE, "", false},
	} {
		got := nsList(apply(t, WithContainerNamespaces(pod, &runtimeapi.NamespaceOption{Pid: tc.mode})))
		if p, ok := got[specs.PIDNamespace]; ok != tc.has || p != tc.pid {
			t.Errorf("%v: pid namespace %q %v", tc.mode, p, ok)
		}
		if got[specs.UTSNamespace] != "/proc/42/ns/uts" || got[specs.IPCNamespace] != "/proc/42/ns/ipc" || got[specs.NetworkNamespace] != "/n" {
			t.Errorf("%v: pod namespaces %v", tc.mode, got)
		}
	}
	host := nsList(apply(t, WithContainerNamespaces(Namespaces{HostNet: true, HostIPC: true}, &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_NODE})))
	if len(host) != 1 {
		t.Fatalf("host pod namespaces %v", host)
	}
	if _, err := Build("/r", false, WithContainerNamespaces(Namespaces{}, &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: "t"})); err == nil {
		t.Fatal("TARGET without a running target accepted")
	}
}
