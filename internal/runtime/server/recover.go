package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/quantyroot/quantykube/internal/runtime/cni"
	"github.com/quantyroot/quantykube/internal/runtime/store"
)

// recover loads records and cleans directories of creates that never completed.
func (s *Service) recover() error {
	orph, err := s.sandboxes.Load(store.DecodeSandbox)
	if err != nil {
		return err
	}
	for _, id := range orph {
		s.removeIncompleteSandbox(id)
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
	s.removeUnknownWritableLayers()
	slog.Info("recovered state", "sandboxes", len(s.sandboxes.List()), "containers", len(s.containers.List()))
	return nil
}

// removeIncompleteSandbox undoes a sandbox create that crashed before its record was written.
func (s *Service) removeIncompleteSandbox(id string) {
	slog.Warn("removing incomplete sandbox directory", "id", id)
	// The monitor may have created the pause before the crash: remove it from runc.
	_ = s.runc.Delete(context.Background(), id, true)
	// And CNI may have allocated an address: DEL by container ID (libcni's cache).
	if ns := filepath.Join(s.cfg.StateDir, "netns", id); fileExists(ns) {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeouts.cniTeardown)
		if err := s.net.Teardown(ctx, cni.Pod{ID: id, NetNS: ns}); err != nil {
			slog.Warn("CNI teardown of incomplete sandbox", "id", id, "err", err)
		}
		cancel()
	}
	s.cleanupSandboxDir(id)
}

// removeUnknownWritableLayers drops the writable layers (they outlive /run across a
// reboot) of containers and sandboxes without a record.
func (s *Service) removeUnknownWritableLayers() {
	ents, err := os.ReadDir(filepath.Join(s.cfg.RootDir, "rw"))
	if err != nil {
		return
	}
	for _, e := range ents {
		_, cerr := s.containers.Get(e.Name())
		_, serr := s.sandboxes.Get(e.Name())
		if cerr != nil && serr != nil {
			slog.Warn("removing writable layer of an unknown container", "id", e.Name())
			s.fs.UnmountAll(filepath.Join(s.containers.RecordDir(e.Name()), "rootfs"))
			os.RemoveAll(filepath.Join(s.cfg.RootDir, "rw", e.Name()))
		}
	}
}
