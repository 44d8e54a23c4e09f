package runtimemove

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// kubeletSetup is what the move needs to know of the kubelet's files.
type kubeletSetup struct {
	config []byte // config.yaml as read
	flags  []byte // kubeadm-flags.env as read (nil when absent)
	// Endpoint is the current runtime endpoint ("unix:///run/containerd/containerd.sock").
	Endpoint string
	// EndpointInFlags says kubeadm-flags.env sets it (else config.yaml does).
	EndpointInFlags bool
	// CgroupDriver is "systemd" or "cgroupfs".
	CgroupDriver string
	// FailCgroupV1 is the kubelet's failCgroupV1 (default true).
	FailCgroupV1 bool
}

var (
	flagEndpointRE = regexp.MustCompile(`--container-runtime-endpoint[= ]("?)([^" ]+)`)
	cgroupFlagRE   = regexp.MustCompile(`--cgroup-driver[= ]`)
)

// readKubelet reads and checks the kubelet's configuration; every error
// names the file and what to do.
func (p Paths) readKubelet() (*kubeletSetup, error) {
	cfg, err := os.ReadFile(p.KubeletConfig)
	if err != nil {
		return nil, fmt.Errorf("kubelet config %s not found (%v); this is not a kubeadm node, or pass --kubelet-config", p.KubeletConfig, unwrap(err))
	}
	var doc map[string]any
	if err := yaml.Unmarshal(cfg, &doc); err != nil {
		return nil, fmt.Errorf("kubelet config %s is not YAML (%v); fix the file or pass --kubelet-config", p.KubeletConfig, err)
	}
	if doc["kind"] != "KubeletConfiguration" {
		return nil, fmt.Errorf("%s is not a KubeletConfiguration (kind %v); pass kubeadm's /var/lib/kubelet/config.yaml with --kubelet-config", p.KubeletConfig, doc["kind"])
	}
	k := &kubeletSetup{config: cfg, FailCgroupV1: true}
	if v, ok := doc["failCgroupV1"].(bool); ok {
		k.FailCgroupV1 = v
	}
	if v, ok := doc["containerRuntimeEndpoint"].(string); ok {
		k.Endpoint = v
	}
	switch d, _ := doc["cgroupDriver"].(string); d {
	case "", "cgroupfs":
		k.CgroupDriver = "cgroupfs"
	case "systemd":
		k.CgroupDriver = "systemd"
	default:
		return nil, fmt.Errorf("cgroup driver %q in %s is unknown; set cgroupDriver to systemd or cgroupfs", d, p.KubeletConfig)
	}
	flags, err := os.ReadFile(p.KubeletFlags)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", p.KubeletFlags, err)
	}
	if err == nil {
		k.flags = flags
		if m := flagEndpointRE.FindSubmatch(flags); m != nil {
			k.Endpoint, k.EndpointInFlags = string(m[2]), true
		}
		if cgroupFlagRE.Match(flags) {
			return nil, fmt.Errorf("%s sets --cgroup-driver; move it into %s's cgroupDriver first", p.KubeletFlags, p.KubeletConfig)
		}
	}
	// Drop-ins other than kubeadm's must not pin the runtime.
	for _, dir := range p.DropInDirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.conf"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if flagEndpointRE.Match(b) || cgroupFlagRE.Match(b) {
				return nil, fmt.Errorf("kubelet drop-in %s sets the runtime endpoint or cgroup driver itself; this is not kubeadm's kubelet setup, move those flags into %s", f, p.KubeletConfig)
			}
		}
	}
	if k.Endpoint == "" {
		return nil, fmt.Errorf("the kubelet's runtime endpoint is not known: neither %s (containerRuntimeEndpoint) nor %s (--container-runtime-endpoint) sets it; set one", p.KubeletConfig, p.KubeletFlags)
	}
	if !strings.HasPrefix(k.Endpoint, "unix://") {
		return nil, fmt.Errorf("runtime endpoint %q is not a unix:// socket; only local CRI sockets are supported", k.Endpoint)
	}
	return k, nil
}

// socketPath is the filesystem path of a unix:// endpoint.
func socketPath(endpoint string) string { return strings.TrimPrefix(endpoint, "unix://") }

// setTopLevel sets a top-level YAML key to value, replacing its line or
// appending one; every other byte is kept.
func setTopLevel(doc []byte, key, value string) []byte {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `:.*$`)
	line := key + ": " + value
	if re.Match(doc) {
		return re.ReplaceAllLiteral(doc, []byte(line))
	}
	out := append([]byte{}, doc...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, []byte(line+"\n")...)
}

// switched returns the kubelet's files pointed at endpoint with the cgroupfs
// driver: config.yaml, and kubeadm-flags.env when it sets the endpoint.
func (k *kubeletSetup) switched(endpoint string) (config, flags []byte) {
	config = k.config
	if k.CgroupDriver != "cgroupfs" {
		config = setTopLevel(config, "cgroupDriver", "cgroupfs")
	}
	flags = k.flags
	if k.EndpointInFlags {
		flags = flagEndpointRE.ReplaceAll(flags, []byte("--container-runtime-endpoint=${1}"+endpoint))
	} else {
		config = setTopLevel(config, "containerRuntimeEndpoint", endpoint)
	}
	return config, flags
}

func unwrap(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
