package oci

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The golden test pins the exact bytes of the specs SandboxSpec and ContainerSpec build
// (what the runtime writes as config.json) for representative CRI configs, and the exact
// text of their refusals. It was recorded before the spec builder was split into options;
// a change of these files is a change of what runc runs. `go test ./internal/runtime/oci
// -run Golden -update` rewrites them.
var update = flag.Bool("update", false, "rewrite testdata/golden")

// goldenEnv is a fixed rootfs and host directories below one temporary directory, which
// normalize() turns back into "$TMP".
type goldenEnv struct {
	tmp, rootfs string
}

func newGoldenEnv(t *testing.T) goldenEnv {
	t.Helper()
	tmp := t.TempDir()
	e := goldenEnv{tmp: tmp, rootfs: filepath.Join(tmp, "rootfs")}
	must(t, os.MkdirAll(filepath.Join(e.rootfs, "etc"), 0o755))
	must(t, os.WriteFile(filepath.Join(e.rootfs, "etc/passwd"), []byte(
		"root:x:0:0:root:/root:/bin/sh\nwww-data:x:33:33:www-data:/var/www:/bin/sh\nuser1000:x:1000:1000::/home/u:/bin/sh\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(e.rootfs, "etc/group"), []byte(
		"root:x:0:\nwww-data:x:33:\nuser1000:x:1000:\ng50000:x:50000:user1000\nstaff:x:50:user1000,www-data\n"), 0o644))
	for _, d := range []string{"data", "ro", "rro", "shared", "slave"} {
		must(t, os.MkdirAll(filepath.Join(tmp, "host", d), 0o755))
	}
	return e
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (e goldenEnv) host(p string) string { return filepath.Join(e.tmp, "host", p) }

func (e goldenEnv) files(shm bool) SandboxFiles {
	f := SandboxFiles{Hosts: "/sb/hosts", ResolvConf: "/sb/resolv.conf", Hostname: "/sb/hostname"}
	if shm {
		f.Shm = "/sb/shm"
	}
	return f
}

var goldenImage = &v1.ConfigFile{Config: v1.Config{Entrypoint: []string{"/ep"}, Cmd: []string{"c1", "c2"},
	Env: []string{"A=1", "PATH=/img/bin", "B=x=y"}, WorkingDir: "/work", User: "www-data"}}

var pauseImage = &v1.ConfigFile{Config: v1.Config{Entrypoint: []string{"/pause"}, Env: []string{"PATH=/bin"}}}

func i64(v int64) *runtimeapi.Int64Value { return &runtimeapi.Int64Value{Value: v} }

type goldenSandbox struct {
	name string
	cfg  *runtimeapi.PodSandboxConfig
	ns   Namespaces
	shm  bool
	// oom is the oom_score_adj the spec asks for before clamping.
	oom int
}

func goldenSandboxes() []goldenSandbox {
	return []goldenSandbox{
		{name: "sandbox-default", cfg: &runtimeapi.PodSandboxConfig{Hostname: "pod-a",
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "a", Namespace: "ns", Uid: "u"}},
			ns: Namespaces{NetNS: "/run/netns/a"}, shm: true, oom: -998},
		{name: "sandbox-host-privileged", cfg: &runtimeapi.PodSandboxConfig{Hostname: "ignored",
			Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/kubepods/pod1",
				Sysctls: map[string]string{"net.ipv4.ip_forward": "1", "kernel.shm_rmid_forced": "1"},
				SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{Privileged: true,
					RunAsUser: i64(1000), RunAsGroup: i64(2000), SupplementalGroups: []int64{3000, 4000},
					NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE,
						Ipc: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_NODE}}}},
			ns: Namespaces{HostNet: true}, oom: -998},
		{name: "sandbox-seccomp-resources", cfg: &runtimeapi.PodSandboxConfig{Hostname: "pod-c",
			Linux: &runtimeapi.LinuxPodSandboxConfig{
				Resources: &runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 50000, CpuShares: 512,
					MemoryLimitInBytes: 64 << 20, MemorySwapLimitInBytes: 128 << 20, CpusetCpus: "0", CpusetMems: "0",
					HugepageLimits: []*runtimeapi.HugepageLimit{{PageSize: "2MB", Limit: 0}},
					Unified:        map[string]string{"memory.high": "max"}},
				SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
					Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}}}},
			ns: Namespaces{NetNS: "/run/netns/c"}, shm: true, oom: -998},
	}
}

type goldenContainer struct {
	name    string
	cfg     *runtimeapi.ContainerConfig
	sandbox *runtimeapi.PodSandboxConfig
	ns      Namespaces
	shm     bool
	rro     bool
	oom     int
}

func lsc(sc *runtimeapi.LinuxContainerSecurityContext) *runtimeapi.LinuxContainerConfig {
	return &runtimeapi.LinuxContainerConfig{SecurityContext: sc}
}

func goldenContainers(e goldenEnv) []goldenContainer {
	podNS := Namespaces{NetNS: "/run/netns/a", PausePid: 42}
	privSandbox := &runtimeapi.PodSandboxConfig{Linux: &runtimeapi.LinuxPodSandboxConfig{
		SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{Privileged: true}}}
	return []goldenContainer{
		{name: "container-default", cfg: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
			Envs: []*runtimeapi.KeyValue{{Key: "A", Value: []byte("2")}, {Key: "C", Value: []byte("3")}}},
			sandbox: &runtimeapi.PodSandboxConfig{}, ns: podNS, shm: true},
		{name: "container-restricted", cfg: &runtimeapi.ContainerConfig{
			Command: []string{"/bin/sh"}, Args: []string{"-c", "sleep 1"}, WorkingDir: "/srv", Tty: true,
			Annotations: map[string]string{"a": "1", "b": "2"},
			Linux: &runtimeapi.LinuxContainerConfig{
				Resources: &runtimeapi.LinuxContainerResources{CpuShares: 2, MemoryLimitInBytes: 1 << 30, OomScoreAdj: 500},
				SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
					RunAsUser: i64(1000), RunAsGroup: i64(1000), SupplementalGroups: []int64{7, 1000},
					Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"net_admin"}, DropCapabilities: []string{"ALL"}},
					NoNewPrivs:   true, ReadonlyRootfs: true,
					MaskedPaths: []string{"/proc/kcore"}, ReadonlyPaths: []string{},
					Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}}},
			Mounts: []*runtimeapi.Mount{
				{ContainerPath: "/data", HostPath: e.host("data")},
				{ContainerPath: "/ro", HostPath: e.host("ro"), Readonly: true},
				{ContainerPath: "/rro", HostPath: e.host("rro"), Readonly: true, RecursiveReadOnly: true,
					Propagation: runtimeapi.MountPropagation_PROPAGATION_PRIVATE},
				{ContainerPath: "/slave", HostPath: e.host("slave"), Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
				{ContainerPath: "/shared", HostPath: e.host("shared"), Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL},
				{ContainerPath: "/created", HostPath: e.host("missing/created")},
			},
			Devices: []*runtimeapi.Device{{ContainerPath: "/dev/mynull", HostPath: "/dev/null", Permissions: "rw"}}},
			sandbox: &runtimeapi.PodSandboxConfig{}, ns: podNS, shm: true, rro: true, oom: 500},
		{name: "container-privileged-host", cfg: &runtimeapi.ContainerConfig{
			Linux: lsc(&runtimeapi.LinuxContainerSecurityContext{Privileged: true, RunAsUser: i64(0),
				NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_NODE}}),
			Mounts: []*runtimeapi.Mount{{ContainerPath: "/sys/fs/cgroup", HostPath: e.host("data")}}},
			sandbox: privSandbox, ns: Namespaces{HostNet: true, HostIPC: true, HostPID: true}},
		{name: "container-target-pid", cfg: &runtimeapi.ContainerConfig{Args: []string{"only-args"},
			Linux: lsc(&runtimeapi.LinuxContainerSecurityContext{RunAsUsername: "user1000",
				SeccompProfilePath: "runtime/default",
				NamespaceOptions:   &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: "t"}})},
			sandbox: &runtimeapi.PodSandboxConfig{}, ns: Namespaces{NetNS: "/run/netns/a", PausePid: 42, TargetPid: 77}},
		{name: "container-all-caps-strict", cfg: &runtimeapi.ContainerConfig{
			Envs: []*runtimeapi.KeyValue{{Key: "HOME", Value: []byte("/home/x")}},
			Linux: lsc(&runtimeapi.LinuxContainerSecurityContext{RunAsUser: i64(1000),
				SupplementalGroupsPolicy: runtimeapi.SupplementalGroupsPolicy_Strict,
				Capabilities:             &runtimeapi.Capability{AddCapabilities: []string{"ALL"}},
				SeccompProfilePath:       "unconfined",
				NamespaceOptions:         &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}}),
			Mounts: []*runtimeapi.Mount{
				{ContainerPath: "/etc/hosts", HostPath: e.host("data"), Readonly: true},
				{ContainerPath: "/dev", HostPath: e.host("ro")},
				{ContainerPath: "/x", HostPath: e.host("ro")},
				{ContainerPath: "/x", HostPath: e.host("rro")},
			}},
			sandbox: &runtimeapi.PodSandboxConfig{}, ns: podNS},
	}
}

// goldenErrors are refused configs; their error texts are pinned too.
func goldenErrors(e goldenEnv) []goldenContainer {
	return []goldenContainer{
		{name: "group-without-user", cfg: &runtimeapi.ContainerConfig{Linux: lsc(&runtimeapi.LinuxContainerSecurityContext{RunAsGroup: i64(1)})}},
		{name: "relative-container-path", cfg: &runtimeapi.ContainerConfig{Mounts: []*runtimeapi.Mount{{ContainerPath: "rel", HostPath: "/tmp"}}}},
		{name: "relative-host-path", cfg: &runtimeapi.ContainerConfig{Mounts: []*runtimeapi.Mount{{ContainerPath: "/a", HostPath: "rel"}}}},
		{name: "privileged-in-unprivileged-sandbox", cfg: &runtimeapi.ContainerConfig{Linux: lsc(&runtimeapi.LinuxContainerSecurityContext{Privileged: true})}},
		{name: "unknown-capability", cfg: &runtimeapi.ContainerConfig{Linux: lsc(&runtimeapi.LinuxContainerSecurityContext{
			Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"NOPE"}}})}},
		{name: "unknown-user", cfg: &runtimeapi.ContainerConfig{Linux: lsc(&runtimeapi.LinuxContainerSecurityContext{RunAsUsername: "ghost"})}},
		{name: "rro-unsupported", cfg: &runtimeapi.ContainerConfig{Mounts: []*runtimeapi.Mount{{ContainerPath: "/r", HostPath: e.host("rro"), Readonly: true, RecursiveReadOnly: true}}}},
		{name: "rro-not-readonly", rro: true, cfg: &runtimeapi.ContainerConfig{Mounts: []*runtimeapi.Mount{{ContainerPath: "/r", HostPath: e.host("rro"), RecursiveReadOnly: true}}}},
		{name: "rro-not-private", rro: true, cfg: &runtimeapi.ContainerConfig{Mounts: []*runtimeapi.Mount{{ContainerPath: "/r", HostPath: e.host("rro"), Readonly: true, RecursiveReadOnly: true,
			Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER}}}},
		{name: "target-not-running", cfg: &runtimeapi.ContainerConfig{Linux: lsc(&runtimeapi.LinuxContainerSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: "gone"}})}},
		{name: "not-a-device", cfg: &runtimeapi.ContainerConfig{Devices: []*runtimeapi.Device{{ContainerPath: "/dev/x", HostPath: e.host("data")}}}},
		{name: "seccomp-relative", cfg: &runtimeapi.ContainerConfig{Linux: lsc(&runtimeapi.LinuxContainerSecurityContext{SeccompProfilePath: "localhost/rel.json"})}},
		{name: "no-command", cfg: &runtimeapi.ContainerConfig{}},
	}
}

func (e goldenEnv) input(c goldenContainer) ContainerInput {
	sb := c.sandbox
	if sb == nil {
		sb = &runtimeapi.PodSandboxConfig{}
	}
	return ContainerInput{Config: c.cfg, Sandbox: sb, Image: goldenImage, Rootfs: e.rootfs, CgroupsPath: "/kubepods/pod1/ctr",
		NS: c.ns, Files: e.files(c.shm), Hostname: "pod-a", RecursiveReadOnly: c.rro}
}

// normalize makes a spec's JSON independent of the machine: the temporary directory, the
// bounding capability set, the host's device nodes and the oom_score_adj clamp (which
// depends on the test process's own value) become placeholders.
func (e goldenEnv) normalize(t *testing.T, b []byte, oom int) []byte {
	t.Helper()
	s := strings.ReplaceAll(string(b), e.tmp, "$TMP")
	caps, _ := json.Marshal(BoundingCaps())
	s = strings.ReplaceAll(s, string(caps), `"$BOUNDING_CAPS"`)
	if devs := HostDevices(); len(devs) > 0 {
		var parts []string
		for _, d := range devs {
			j, _ := json.Marshal(d)
			parts = append(parts, string(j))
		}
		s = strings.ReplaceAll(s, strings.Join(parts, ","), `"$HOST_DEVICES"`)
	}
	s = strings.ReplaceAll(s, fmt.Sprintf(`"oomScoreAdj":%d`, ClampOOMScoreAdj(oom)), fmt.Sprintf(`"oomScoreAdj":"clamp(%d)"`, oom))
	var out bytes.Buffer
	must(t, json.Indent(&out, []byte(s), "", "  "))
	out.WriteByte('\n')
	return out.Bytes()
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", "golden", name)
	if *update {
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, got, 0o644))
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run with -update to record)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the recorded spec:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestGoldenSandboxSpecs(t *testing.T) {
	e := newGoldenEnv(t)
	for _, c := range goldenSandboxes() {
		t.Run(c.name, func(t *testing.T) {
			s, err := SandboxSpec(c.cfg, pauseImage, e.rootfs, "/kubepods/pod1/sb", c.ns, e.files(c.shm))
			must(t, err)
			b, err := json.Marshal(s)
			must(t, err)
			checkGolden(t, c.name+".json", e.normalize(t, b, c.oom))
		})
	}
}

func TestGoldenContainerSpecs(t *testing.T) {
	e := newGoldenEnv(t)
	for _, c := range goldenContainers(e) {
		t.Run(c.name, func(t *testing.T) {
			s, err := ContainerSpec(e.input(c))
			must(t, err)
			b, err := json.Marshal(s)
			must(t, err)
			checkGolden(t, c.name+".json", e.normalize(t, b, c.oom))
		})
	}
}

func TestGoldenRefusals(t *testing.T) {
	e := newGoldenEnv(t)
	var out strings.Builder
	for _, c := range goldenErrors(e) {
		in := e.input(c)
		if c.name == "no-command" {
			in.Image = &v1.ConfigFile{}
		}
		_, err := ContainerSpec(in)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		fmt.Fprintf(&out, "%s: %s\n", c.name, strings.ReplaceAll(err.Error(), e.tmp, "$TMP"))
	}
	if _, err := SandboxSpec(&runtimeapi.PodSandboxConfig{}, &v1.ConfigFile{}, e.rootfs, "/p", Namespaces{}, SandboxFiles{}); err != nil {
		fmt.Fprintf(&out, "sandbox-no-entrypoint: %s\n", err)
	}
	checkGolden(t, "refusals.txt", []byte(out.String()))
}
