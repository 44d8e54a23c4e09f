package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/oci"
)

// sandboxFiles names the shared files of a sandbox in its directory.
func sandboxFiles(dir string, hostIPC bool) oci.SandboxFiles {
	f := oci.SandboxFiles{
		Hosts:      filepath.Join(dir, "hosts"),
		ResolvConf: filepath.Join(dir, "resolv.conf"),
		Hostname:   filepath.Join(dir, "hostname"),
	}
	if !hostIPC {
		f.Shm = filepath.Join(dir, "shm")
	}
	return f
}

// writeSandboxFiles writes hostname, hosts and resolv.conf and mounts the shm tmpfs.
func (s *Service) writeSandboxFiles(f oci.SandboxFiles, cfg *runtimeapi.PodSandboxConfig, hostNet bool, ip string) error {
	if err := writePodFiles(f, cfg, hostNet, ip); err != nil {
		return err
	}
	if f.Shm == "" {
		return nil
	}
	if err := os.MkdirAll(f.Shm, 0o700); err != nil {
		return fmt.Errorf("create shm dir: %w", err)
	}
	return s.fs.MountShm(f.Shm)
}

// writePodFiles writes hostname, hosts (the node's for host network) and resolv.conf
// (from the DNS config, else the node's).
func writePodFiles(f oci.SandboxFiles, cfg *runtimeapi.PodSandboxConfig, hostNet bool, ip string) error {
	hostname := cfg.GetHostname()
	if hostNet || hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("host name: %w", err)
		}
		if hostNet || hostname == "" {
			hostname = h
		}
	}
	if err := os.WriteFile(f.Hostname, []byte(hostname+"\n"), 0o644); err != nil {
		return fmt.Errorf("write hostname: %w", err)
	}
	var hosts string
	if hostNet {
		b, err := os.ReadFile("/etc/hosts")
		if err != nil {
			b = []byte("127.0.0.1 localhost\n")
		}
		hosts = string(b)
	} else {
		hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nff00::0\tip6-mcastprefix\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n"
		if ip != "" {
			hosts += ip + "\t" + hostname + "\n"
		}
	}
	if err := os.WriteFile(f.Hosts, []byte(hosts), 0o644); err != nil {
		return fmt.Errorf("write hosts: %w", err)
	}
	var resolv string
	if d := cfg.GetDnsConfig(); d != nil && (len(d.Servers) > 0 || len(d.Searches) > 0 || len(d.Options) > 0) {
		var b strings.Builder
		for _, s := range d.Servers {
			fmt.Fprintf(&b, "nameserver %s\n", s)
		}
		if len(d.Searches) > 0 {
			fmt.Fprintf(&b, "search %s\n", strings.Join(d.Searches, " "))
		}
		if len(d.Options) > 0 {
			fmt.Fprintf(&b, "options %s\n", strings.Join(d.Options, " "))
		}
		resolv = b.String()
	} else {
		b, _ := os.ReadFile("/etc/resolv.conf")
		resolv = string(b)
	}
	if err := os.WriteFile(f.ResolvConf, []byte(resolv), 0o644); err != nil {
		return fmt.Errorf("write resolv.conf: %w", err)
	}
	return nil
}
