package server

import (
	"context"
	"os/exec"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/quantyroot/quantykube/internal/runtime/cni"
	"github.com/quantyroot/quantykube/internal/runtime/images"
	"github.com/quantyroot/quantykube/internal/runtime/monitor"
	"github.com/quantyroot/quantykube/internal/runtime/runc"
)

// The service reaches the host only through the interfaces below (containerd's CRI server
// has the same seams: its OS interface, go-cni, the task service). New wires the real
// ones; unit tests wire fakes and drive one CRI call at a time, including its failures.

// Runc is the runc binary (package runc): one method per runc invocation. A container runc
// does not know is an error wrapping runc.ErrNotFound.
type Runc interface {
	// Start runs the user process of a created container.
	Start(ctx context.Context, id string) error
	// Kill sends sig to the container's init, or to every process of it with all.
	Kill(ctx context.Context, id string, sig syscall.Signal, all bool) error
	// Delete removes runc's record and leaf cgroup; force kills a running container first.
	Delete(ctx context.Context, id string, force bool) error
	// State is runc's view of the container.
	State(ctx context.Context, id string) (runc.State, error)
	// Update changes a running container's resources.
	Update(ctx context.Context, id string, res *specs.LinuxResources) error
	// ExecCommand is an unstarted `runc exec` of p; the exec'd process's pid goes to pidFile.
	ExecCommand(ctx context.Context, id string, p *specs.Process, processFile, pidFile, consoleSocket string) (*exec.Cmd, error)
	// SupportsMountOption reports whether runc knows a mount option (e.g. "rro").
	SupportsMountOption(ctx context.Context, opt string) bool
}

// Monitors starts per-container monitors (package monitor). A monitor runs `runc create`
// for the bundle in o.Bundle and outlives the runtime; it records the container's exit in
// o.Dir (monitor.ReadExit).
type Monitors interface {
	// Spawn returns once runc create finished: the container's init pid, or runc's error.
	Spawn(o monitor.Options) (pid int, err error)
}

// Network is the pod network (package cni).
type Network interface {
	// Setup attaches the pod (CNI ADD) and returns its IPs, the primary first.
	Setup(ctx context.Context, p cni.Pod) ([]string, error)
	// Teardown detaches the pod (CNI DEL); it is safe to call twice.
	Teardown(ctx context.Context, p cni.Pod) error
	// Ready is nil when a network configuration exists.
	Ready() error
}

// Filesystem is every mount the service makes on the host: container root filesystems,
// the pods' /dev/shm and their pinned network namespaces (hostFS does them with mount(2)).
// Directories and files below the state and root dirs are plain files, not behind it.
type Filesystem interface {
	// MountOverlay mounts an overlay at target: lower are the layer directories (the top
	// one first, as overlayfs lists them), upper and work exist.
	MountOverlay(lower []string, upper, work, target string) error
	// MountShm mounts the pod's 64 MiB /dev/shm tmpfs at dir (an existing directory).
	MountShm(dir string) error
	// Unmount detaches target; a target that is not mounted (or missing) is not an error.
	Unmount(target string) error
	// UnmountAll detaches every mount stacked at p, ignoring errors.
	UnmountAll(p string)
	// CreateNetNS pins a new network namespace (loopback up) at path; on error nothing is left.
	CreateNetNS(path string) error
	// RemoveNetNS unpins and deletes the namespace at path; a missing one is not an error.
	RemoveNetNS(path string) error
}

// Images is the image store (package images): pull, unpack into layers, index, remove.
type Images interface {
	Lookup(ref string) (images.Image, bool)
	Config(id string) (*v1.ConfigFile, error)
	Pull(ctx context.Context, ref string, auth *images.Auth) (images.Image, error)
	// Hold keeps layer garbage collection away until release; not across a Pull.
	Hold() (release func())
	SetPinned(id string, pinned bool) error
	// LayerDir is the unpacked directory of a layer.
	LayerDir(diffID string) string
	List() []images.Image
	// Remove untags ref and collects the layers not in keep.
	Remove(ref string, keep []string) error
	FsUsage() (images.Usage, error)
}

var (
	_ Runc    = (*runc.Runc)(nil)
	_ Network = (*cni.Network)(nil)
	_ Images  = (*images.Store)(nil)
)

// monitorLauncher re-executes this binary as a monitor: exe args... --flags.
type monitorLauncher struct {
	exe            string
	args           []string
	runc, runcRoot string
}

func (m monitorLauncher) Spawn(o monitor.Options) (int, error) {
	o.Runc, o.RuncRoot = m.runc, m.runcRoot
	return monitor.Spawn(m.exe, m.args, o)
}
