// Package server is the CRI v1 RuntimeService and ImageService. One file per verb; the
// state lives in the sandbox/container stores (package store) and the image store (package
// images); containers run through runc, each under a monitor process (package monitor).
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
	// exe and monitorArgs re-execute this binary as a monitor: exe monitorArgs... --flags.
	exe         string
	monitorArgs []string

	runc       *runc.Runc
	sandboxes  *store.Store[*store.Sandbox]
	containers *store.Store[*store.Container]
	images     *images.Store
	net        *cni.Network
	cg         cgroups.FS
	stream     streaming.Server
	locks      idLocks
	// rro is true when runc can make bind mounts recursively read-only ("rro").
	rro bool
}

// Options are the process-level inputs New needs besides the configuration.
type Options struct {
	// Exe is the binary to re-execute for monitors (os.Executable()).
	Exe string
	// MonitorArgs is the argv after Exe that reaches the hidden monitor command.
	MonitorArgs []string
	// CgroupRoot is the cgroup mount (default /sys/fs/cgroup).
	CgroupRoot string
}

// New opens the stores, recovers state from disk and returns the service.
func New(cfg config.Config, o Options) (*Service, error) {
	for _, d := range []string{cfg.StateDir, cfg.RootDir, cfg.RuncRoot} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	if o.CgroupRoot == "" {
		o.CgroupRoot = "/sys/fs/cgroup"
	}
	runcPath := cfg.RuncPath
	s := &Service{cfg: cfg, exe: o.Exe, monitorArgs: o.MonitorArgs,
		runc: &runc.Runc{Path: runcPath, Root: cfg.RuncRoot},
		net:  cni.New(cfg.CNIConfDir, cfg.CNIBinDirs, cfg.CNICacheDir),
		cg:   cgroups.Detect(o.CgroupRoot)}
	var err error
	if s.sandboxes, err = store.New[*store.Sandbox](filepath.Join(cfg.StateDir, "sandboxes")); err != nil {
		return nil, err
	}
	if s.containers, err = store.New[*store.Container](filepath.Join(cfg.StateDir, "containers")); err != nil {
		return nil, err
	}
	if s.images, err = images.Open(filepath.Join(cfg.RootDir, "images"), cfg.Mirrors); err != nil {
		return nil, err
	}
	if err := s.recover(); err != nil {
		return nil, err
	}
	s.rro = s.runc.SupportsMountOption(context.Background(), "rro")
	return s, nil
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

// recover loads records and cleans directories of creates that never completed.
func (s *Service) recover() error {
	orph, err := s.sandboxes.Load(store.DecodeSandbox)
	if err != nil {
		return err
	}
	for _, id := range orph {
		slog.Warn("removing incomplete sandbox directory", "id", id)
		// The monitor may have created the pause before the crash: remove it from runc.
		_ = s.runc.Delete(context.Background(), id, true)
		// And CNI may have allocated an address: DEL by container ID (libcni's cache).
		if ns := filepath.Join(s.cfg.StateDir, "netns", id); fileExists(ns) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := s.net.Teardown(ctx, cni.Pod{ID: id, NetNS: ns}); err != nil {
				slog.Warn("CNI teardown of incomplete sandbox", "id", id, "err", err)
			}
			cancel()
		}
		s.cleanupSandboxDir(id)
	}
	orph, err = s.containers.Load(store.DecodeContainer)
	if err != nil {
		return err
	}
	for _, id := range orph {
		slog.Warn("removing incomplete container directory", "id", id)
		_ = s.runc.Delete(context.Background(), id, true)
		s.cleanupContainerDir(id)
	}
	// Writable layers outlive /run across a reboot: drop those of containers we no longer know.
	if ents, err := os.ReadDir(filepath.Join(s.cfg.RootDir, "rw")); err == nil {
		for _, e := range ents {
			_, cerr := s.containers.Get(e.Name())
			_, serr := s.sandboxes.Get(e.Name())
			if cerr != nil && serr != nil {
				slog.Warn("removing writable layer of an unknown container", "id", e.Name())
				unmountAll(filepath.Join(s.containers.RecordDir(e.Name()), "rootfs"))
				os.RemoveAll(filepath.Join(s.cfg.RootDir, "rw", e.Name()))
			}
		}
	}
	slog.Info("recovered state", "sandboxes", len(s.sandboxes.List()), "containers", len(s.containers.List()))
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Errors in the shapes kubelet and critest expect.

func notFound(kind, id string) error {
	return status.Errorf(codes.NotFound, "%s %q not found", kind, id)
}

func invalid(format string, a ...any) error {
	return status.Errorf(codes.InvalidArgument, format, a...)
}

// grpcErr keeps a status error and maps store errors; everything else is Unknown.
func grpcErr(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, store.ErrNameInUse):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, images.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

// undo collects cleanup steps for a multi-step create; Run runs them in reverse unless Keep was called.
type undo struct {
	steps []func()
	keep  bool
}

func (u *undo) Add(f func()) { u.steps = append(u.steps, f) }
func (u *undo) Keep()        { u.keep = true }
func (u *undo) Run() {
	if u.keep {
		return
	}
	for i := len(u.steps) - 1; i >= 0; i-- {
		u.steps[i]()
	}
}
