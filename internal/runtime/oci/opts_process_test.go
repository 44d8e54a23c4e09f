package oci

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var pauseImageNoArgs = &v1.ConfigFile{}

func TestWithPauseArgs(t *testing.T) {
	s := apply(t, WithPauseArgs(&v1.ConfigFile{Config: v1.Config{Entrypoint: []string{"/pause"}, Cmd: []string{"-v"}}}))
	if strings.Join(s.Process.Args, " ") != "/pause -v" {
		t.Fatalf("args %v", s.Process.Args)
	}
	if _, err := Build("/r", true, WithPauseArgs(pauseImageNoArgs)); err == nil || !strings.Contains(err.Error(), "set pause_image") {
		t.Fatalf("err %v", err)
	}
}

func TestWithContainerArgs(t *testing.T) {
	img := &v1.ConfigFile{Config: v1.Config{Entrypoint: []string{"/ep"}, Cmd: []string{"cmd"}}}
	for _, tc := range []struct {
		cfg  *runtimeapi.ContainerConfig
		want string
	}{
		{&runtimeapi.ContainerConfig{}, "/ep cmd"},
		{&runtimeapi.ContainerConfig{Args: []string{"a"}}, "/ep a"},
		{&runtimeapi.ContainerConfig{Command: []string{"/c"}}, "/c"},
		{&runtimeapi.ContainerConfig{Command: []string{"/c"}, Args: []string{"a"}}, "/c a"},
	} {
		if s := apply(t, WithContainerArgs(tc.cfg, img)); strings.Join(s.Process.Args, " ") != tc.want {
			t.Errorf("%v: args %v, want %s", tc.cfg, s.Process.Args, tc.want)
		}
	}
	if _, err := Build("/r", false, WithContainerArgs(&runtimeapi.ContainerConfig{}, pauseImageNoArgs)); err == nil {
		t.Fatal("no command accepted")
	}
}

func TestWithEnv(t *testing.T) {
	s := apply(t, WithEnv([]string{"A=1", "B=2"}, []*runtimeapi.KeyValue{{Key: "A", Value: []byte("3")}, {Key: "C", Value: []byte("x=y")}}))
	if strings.Join(s.Process.Env, " ") != defaultPath+" A=3 B=2 C=x=y" {
		t.Fatalf("env %v", s.Process.Env)
	}
	if s := apply(t, WithEnv([]string{"PATH=/bin"}, nil)); strings.Join(s.Process.Env, " ") != "PATH=/bin" {
		t.Fatalf("env with PATH %v", s.Process.Env)
	}
}

func TestWithCwd(t *testing.T) {
	for _, tc := range [][3]string{{"", "", "/"}, {"/img", "", "/img"}, {"/img", "/cfg", "/cfg"}, {"", "/cfg", "/cfg"}} {
		if s := apply(t, WithCwd(tc[0], tc[1])); s.Process.Cwd != tc[2] {
			t.Errorf("WithCwd(%q, %q) = %q", tc[0], tc[1], s.Process.Cwd)
		}
	}
}

func TestSimpleProcessOptions(t *testing.T) {
	s := apply(t, WithTerminal(true), WithHostname("h"), WithNoNewPrivileges(true), WithAnnotations(map[string]string{"a": "b"}),
		WithSysctls(map[string]string{"k": "v"}))
	if !s.Process.Terminal || s.Hostname != "h" || !s.Process.NoNewPrivileges || s.Annotations["a"] != "b" || s.Linux.Sysctl["k"] != "v" {
		t.Fatalf("spec %+v", s)
	}
}

func TestWithOOMScoreAdj(t *testing.T) {
	if s := apply(t, WithOOMScoreAdj(5000)); *s.Process.OOMScoreAdj != 1000 {
		t.Fatalf("oom %d", *s.Process.OOMScoreAdj)
	}
	if s := apply(t, WithContainerOOMScoreAdj(nil)); *s.Process.OOMScoreAdj != ClampOOMScoreAdj(0) {
		t.Fatalf("oom without resources %d", *s.Process.OOMScoreAdj)
	}
	if s := apply(t, WithContainerOOMScoreAdj(&runtimeapi.LinuxContainerResources{OomScoreAdj: 700})); *s.Process.OOMScoreAdj != 700 {
		t.Fatalf("oom 700: %d", *s.Process.OOMScoreAdj)
	}
}

func TestWithHome(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("u:x:1000:1000::/home/u:/bin/sh\n"), 0o644)
	user := func(uid uint32) SpecOpt {
		return func(s *specs.Spec) error { s.Process.User.UID = uid; return nil }
	}
	if s := apply(t, user(1000), WithHome(root)); !slices.Contains(s.Process.Env, "HOME=/home/u") {
		t.Fatalf("env %v", s.Process.Env)
	}
	if s := apply(t, user(5), WithHome(root)); !slices.Contains(s.Process.Env, "HOME=/") {
		t.Fatalf("env without passwd entry %v", s.Process.Env)
	}
	if s := apply(t, WithEnv([]string{"HOME=/x"}, nil), user(1000), WithHome(root)); slices.Contains(s.Process.Env, "HOME=/home/u") {
		t.Fatalf("HOME replaced: %v", s.Process.Env)
	}
}
