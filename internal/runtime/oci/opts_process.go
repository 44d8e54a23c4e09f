package oci

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// WithPauseArgs runs the pause image's entrypoint and cmd; an image with neither is refused.
func WithPauseArgs(img *v1.ConfigFile) SpecOpt {
	return func(s *specs.Spec) error {
		args := append(append([]string{}, img.Config.Entrypoint...), img.Config.Cmd...)
		if len(args) == 0 {
			return fmt.Errorf("pause image has no entrypoint or cmd: set pause_image to a pause image")
		}
		s.Process.Args = args
		return nil
	}
}

// WithContainerArgs sets the command as kubelet means it: the config's command replaces
// the image's entrypoint, its args replace the image's cmd. No command at all is refused.
func WithContainerArgs(cfg *runtimeapi.ContainerConfig, img *v1.ConfigFile) SpecOpt {
	return func(s *specs.Spec) error {
		var args []string
		switch {
		case len(cfg.GetCommand()) > 0:
			args = append(append([]string{}, cfg.GetCommand()...), cfg.GetArgs()...)
		case len(cfg.GetArgs()) > 0:
			args = append(append([]string{}, img.Config.Entrypoint...), cfg.GetArgs()...)
		default:
			args = append(append([]string{}, img.Config.Entrypoint...), img.Config.Cmd...)
		}
		if len(args) == 0 {
			return fmt.Errorf("no command: the image has no entrypoint or cmd and the container config gives no command")
		}
		s.Process.Args = args
		return nil
	}
}

// WithEnv sets the environment: the image's, then kvs (a later key replaces an earlier
// one in place), with the default PATH first when neither sets PATH.
func WithEnv(image []string, kvs []*runtimeapi.KeyValue) SpecOpt {
	return func(s *specs.Spec) error {
		s.Process.Env = mergeEnv(image, kvs)
		return nil
	}
}

// WithCwd sets the working directory: the config's, else the image's, else "/".
func WithCwd(image, config string) SpecOpt {
	return func(s *specs.Spec) error {
		s.Process.Cwd = "/"
		if image != "" {
			s.Process.Cwd = image
		}
		if config != "" {
			s.Process.Cwd = config
		}
		return nil
	}
}

// WithTerminal gives the process a terminal.
func WithTerminal(tty bool) SpecOpt {
	return func(s *specs.Spec) error {
		s.Process.Terminal = tty
		return nil
	}
}

// WithHostname sets the UTS hostname ("" leaves the namespace's own).
func WithHostname(name string) SpecOpt {
	return func(s *specs.Spec) error {
		s.Hostname = name
		return nil
	}
}

// WithNoNewPrivileges sets no_new_privs.
func WithNoNewPrivileges(on bool) SpecOpt {
	return func(s *specs.Spec) error {
		s.Process.NoNewPrivileges = on
		return nil
	}
}

// WithOOMScoreAdj asks for want, clamped to what this process may set (ClampOOMScoreAdj).
func WithOOMScoreAdj(want int) SpecOpt {
	return func(s *specs.Spec) error {
		s.Process.OOMScoreAdj = ptr(ClampOOMScoreAdj(want))
		return nil
	}
}

// WithContainerOOMScoreAdj asks for the resources' oom_score_adj, or 0 when they give none.
func WithContainerOOMScoreAdj(r *runtimeapi.LinuxContainerResources) SpecOpt {
	return WithOOMScoreAdj(int(r.GetOomScoreAdj()))
}

// WithHome sets HOME from the user's /etc/passwd entry in rootfs ("/" without one),
// unless the environment has HOME already. The user must be set before.
func WithHome(rootfs string) SpecOpt {
	return func(s *specs.Spec) error {
		if !hasEnv(s.Process.Env, "HOME") {
			s.Process.Env = append(s.Process.Env, "HOME="+homeOf(rootfs, s.Process.User.UID))
		}
		return nil
	}
}

// WithAnnotations sets the spec's annotations.
func WithAnnotations(a map[string]string) SpecOpt {
	return func(s *specs.Spec) error {
		s.Annotations = a
		return nil
	}
}

// WithSysctls sets namespaced kernel parameters.
func WithSysctls(sysctls map[string]string) SpecOpt {
	return func(s *specs.Spec) error {
		s.Linux.Sysctl = sysctls
		return nil
	}
}

func mergeEnv(image []string, kvs []*runtimeapi.KeyValue) []string {
	out := []string{}
	idx := map[string]int{}
	set := func(k, v string) {
		if i, ok := idx[k]; ok {
			out[i] = k + "=" + v
			return
		}
		idx[k] = len(out)
		out = append(out, k+"="+v)
	}
	for _, e := range image {
		k, v, _ := strings.Cut(e, "=")
		set(k, v)
	}
	for _, kv := range kvs {
		set(kv.Key, string(kv.Value))
	}
	if _, ok := idx["PATH"]; !ok {
		out = append([]string{defaultPath}, out...)
	}
	return out
}

func hasEnv(env []string, k string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, k+"=") {
			return true
		}
	}
	return false
}

func homeOf(rootfs string, uid uint32) string {
	b, err := os.ReadFile(filepath.Join(rootfs, "etc/passwd"))
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			p := strings.Split(l, ":")
			if len(p) >= 6 && p[2] == fmt.Sprint(uid) && p[5] != "" {
				return p[5]
			}
		}
	}
	return "/"
}
