// Package runtimemove moves a drained kubeadm node's kubelet from its
// container runtime (containerd) onto `quantykube runtime`, and back.
//
// Invariants:
//   - The old runtime keeps running and its state (images, root dir) is never
//     written: its pods are stopped and removed through its own CRI socket,
//     and nothing else is asked of it.
//   - The kubelet's files are saved byte for byte under StateDir before the
//     first change, and undo (or a rollback) writes exactly those bytes back.
//   - Every step is journaled (internal/install): a failure puts back every
//     step that began, newest first; a rerun after kill -9 finishes or rolls
//     back the interrupted run before doing anything else.
package runtimemove

import "path/filepath"

// UnitName is the runtime's systemd unit.
const UnitName = "quantykube-runtime"

// RuntimeName is what the runtime reports in CRI Version (and so in the
// node's status.nodeInfo.containerRuntimeVersion, as "quantykube://...").
const RuntimeName = "quantykube"

// Paths are the files a move reads and writes. Defaults are kubeadm's.
type Paths struct {
	KubeletConfig string // the kubelet's KubeletConfiguration
	KubeletFlags  string // kubeadm-flags.env
	KubeletConf   string // the kubelet's kubeconfig (API access as the node)
	DropInDirs    []string
	StateDir      string // journal, lock, saved originals
	Binary        string // the quantykube binary the unit runs
	RuntimeConfig string // the runtime's TOML configuration
	ImageArchives string // optional directory of docker-archive tarballs to import
	CtrPath       string // containerd's ctr, to export images the new runtime lacks
	// ContainerdConfig is containerd's config.toml, whose registry settings and sandbox
	// image are carried into RuntimeConfig (read only; its imports are followed).
	ContainerdConfig string
}

// DefaultPaths are kubeadm's and QuantyKube's defaults.
func DefaultPaths() Paths {
	return Paths{
		KubeletConfig: "/var/lib/kubelet/config.yaml",
		KubeletFlags:  "/var/lib/kubelet/kubeadm-flags.env",
		KubeletConf:   "/etc/kubernetes/kubelet.conf",
		DropInDirs:    []string{"/etc/systemd/system/kubelet.service.d", "/usr/lib/systemd/system/kubelet.service.d", "/lib/systemd/system/kubelet.service.d"},
		StateDir:      "/var/lib/quantykube/install/runtime",
		Binary:        "/usr/local/bin/quantykube",
		RuntimeConfig: "/etc/quantykube/runtime.toml",
		CtrPath:       "ctr",

		ContainerdConfig: "/etc/containerd/config.toml",
	}
}

func (p Paths) journal() string  { return filepath.Join(p.StateDir, "journal.jsonl") }
func (p Paths) lockFile() string { return filepath.Join(p.StateDir, "lock") }
func (p Paths) metaFile() string { return filepath.Join(p.StateDir, "meta.json") }

// savedDir holds the kubelet's original files, byte for byte.
func (p Paths) savedDir() string { return filepath.Join(p.StateDir, "original") }
func (p Paths) savedConfig() string {
	return filepath.Join(p.savedDir(), "config.yaml")
}
func (p Paths) savedFlags() string {
	return filepath.Join(p.savedDir(), "kubeadm-flags.env")
}

// savedRuntimeConfig is runtime.toml before carry-registries changed it.
func (p Paths) savedRuntimeConfig() string {
	return filepath.Join(p.savedDir(), "runtime.toml")
}

// savedRuntimeConfigAbsent marks that runtime.toml did not exist.
func (p Paths) savedRuntimeConfigAbsent() string {
	return filepath.Join(p.savedDir(), "runtime.toml.absent")
}

// savedFlagsAbsent marks that kubeadm-flags.env did not exist.
func (p Paths) savedFlagsAbsent() string {
	return filepath.Join(p.savedDir(), "kubeadm-flags.env.absent")
}
