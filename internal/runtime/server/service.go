// Package server is the CRI v1 RuntimeService and ImageService. One file per verb; the
// state lives in the sandbox/container stores (package store) and the image store (package
// images); containers run through runc, each under a monitor process (package monitor).
// The host is reached only through the interfaces of deps.go.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"

	"github.com/quantyroot/quantykube/internal/runtime/cgroups"
	"github.com/quantyroot/quantykube/internal/runtime/cni"
	"github.com/quantyroot/quantykube/internal/runtime/config"
	"github.com/quantyroot/quantykube/internal/runtime/images"
	"github.com/quantyroot/quantykube/internal/runtime/runc"
	"github.com/quantyroot/quantykube/internal/runtime/store"
)

// Service implements runtimeapi.RuntimeServiceServer and runtimeapi.ImageServiceServer.
type Service struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	cfg config.Config
	deps
	timeouts timeouts

	sandboxes  *store.Store[*store.Sandbox]
	containers *store.Store[*store.Container]
	stream     streaming.Server
	locks      idLocks
	// rro is true when runc can make bind mounts recursively read-only ("rro").
	rro bool
}

// deps are the service's seams to the host (deps.go).
type deps struct {
	runc     Runc
	monitors Monitors
	net      Network
	fs       Filesystem
	images   Images
	cg       cgroups.FS
}

// timeouts bound the waits of the service's verbs.
type timeouts struct {
	// exitRecorded is how long a killed process's monitor may take to record the exit.
	exitRecorded time.Duration
	// exitPoll is how often the exit record is looked for.
	exitPoll time.Duration
	// cniTeardown bounds a CNI DEL that undoes a failed or interrupted sandbox create.
	cniTeardown time.Duration
}

var defaultTimeouts = timeouts{exitRecorded: 10 * time.Second, exitPoll: 20 * time.Millisecond, cniTeardown: 30 * time.Second}

// Options are the process-level inputs New needs besides the configuration.
type Options struct {
	// Exe is the binary to re-execute for monitors (os.Executable()).
	Exe string
	// MonitorArgs is the argv after Exe that reaches the hidden monitor command.
	MonitorArgs []string
	// CgroupRoot is the cgroup mount (default /sys/fs/cgroup).
	CgroupRoot string
}

// New opens the stores, recovers state from disk and returns the service, wired to the
// host: runc, libcni, mount(2), the image store under root_dir and monitors re-executing Exe.
func New(cfg config.Config, o Options) (*Service, error) {
	if o.CgroupRoot == "" {
		o.CgroupRoot = "/sys/fs/cgroup"
	}
	if err := makeDirs(cfg); err != nil {
		return nil, err
	}
	reg, err := cfg.Registries()
	if err != nil {
		return nil, err
	}
	// A problem in a hosts.toml or certificate fails only the pulls of its registry
	// (files under config_path are read at each pull and may be fixed meanwhile).
	if err := reg.Check(); err != nil {
		slog.Warn("registry configuration: pulls of the registry it names will fail until it is fixed", "err", err)
	}
	im, err := images.Open(filepath.Join(cfg.RootDir, "images"), reg)
	if err != nil {
		return nil, err
	}
	r := &runc.Runc{Path: cfg.RuncPath, Root: cfg.RuncRoot}
	return newService(cfg, deps{
		runc:     r,
		monitors: monitorLauncher{exe: o.Exe, args: o.MonitorArgs, runc: r.Path, runcRoot: r.Root},
		net:      cni.New(cfg.CNIConfDir, cfg.CNIBinDirs, cfg.CNICacheDir),
		fs:       hostFS{},
		images:   im,
		cg:       cgroups.Detect(o.CgroupRoot),
	}, defaultTimeouts)
}

// newService builds the service on d and recovers the state recorded under cfg's dirs.
func newService(cfg config.Config, d deps, t timeouts) (*Service, error) {
	if err := makeDirs(cfg); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, deps: d, timeouts: t}
	var err error
	if s.sandboxes, err = store.New[*store.Sandbox](filepath.Join(cfg.StateDir, "sandboxes")); err != nil {
		return nil, err
	}
	if s.containers, err = store.New[*store.Container](filepath.Join(cfg.StateDir, "containers")); err != nil {
		return nil, err
	}
	if err := s.recover(); err != nil {
		return nil, err
	}
	s.rro = s.runc.SupportsMountOption(context.Background(), "rro")
	return s, nil
}

func makeDirs(cfg config.Config) error {
	for _, d := range []string{cfg.StateDir, cfg.RootDir, cfg.RuncRoot} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	return nil
}

// SetStreaming installs the streaming server used by Exec/Attach/PortForward.
func (s *Service) SetStreaming(st streaming.Server) { s.stream = st }

// newID returns a random 32-hex-character ID (short enough for unix socket paths below it).
func newID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
