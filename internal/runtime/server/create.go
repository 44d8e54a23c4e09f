package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/quantyroot/quantykube/internal/runtime/monitor"
	"github.com/quantyroot/quantykube/internal/runtime/oci"
)

// task is one runc container to create: a sandbox's pause or a workload container. Both
// are created by createTask, the one place that mounts a root filesystem, writes an OCI
// bundle and starts a monitor.
type task struct {
	id string
	// dir is the record directory: the OCI bundle and the monitor's directory.
	dir    string
	layers []string
	rootfs string
	// spec builds the spec once the rootfs is mounted (the user is resolved in it), with
	// the host's options appended. Its error is returned as it is.
	spec func(host ...oci.SpecOpt) (*specs.Spec, error)
	// monitor carries the log path and stdio of the container; IDs and dirs are filled in.
	monitor monitor.Options
	// what names the task in errors ("pause container", "container web").
	what string
}

// createTask mounts t's rootfs, writes its config.json and has a monitor run `runc
// create`. Each step registers its undo on u. It returns the init pid and the spec.
func (s *Service) createTask(u *undo, t task) (int, *specs.Spec, error) {
	if err := s.mountRootfs(t.id, t.layers, t.rootfs); err != nil {
		return 0, nil, err
	}
	u.Add(func() { s.unmountRootfs(t.id, t.rootfs) })
	spec, err := t.spec(s.hostSpecOpts()...)
	if err != nil {
		return 0, nil, err
	}
	if err := writeSpec(t.dir, spec); err != nil {
		return 0, nil, err
	}
	o := t.monitor
	o.ID, o.Bundle, o.Dir = t.id, t.dir, t.dir
	pid, err := s.monitors.Spawn(o)
	if err != nil {
		return 0, nil, fmt.Errorf("create %s: %w", t.what, err)
	}
	u.Add(func() { s.runc.Delete(context.Background(), t.id, true) })
	return pid, spec, nil
}

// hostSpecOpts adapt every spec to this host: without a hugetlb controller runc would
// refuse the hugetlb limits kubelet sends (often 0) for every page size.
func (s *Service) hostSpecOpts() []oci.SpecOpt {
	return []oci.SpecOpt{oci.When(!s.cg.HasController("hugetlb"), oci.WithoutHugepageLimits())}
}

// makeRecordDir creates a record directory and registers cleanup as its undo.
func makeRecordDir(u *undo, dir, kind string, cleanup func()) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return fmt.Errorf("create %s dir: %w", kind, err)
	}
	u.Add(cleanup)
	return nil
}

func writeSpec(dir string, spec *specs.Spec) error {
	b, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encode spec: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		return fmt.Errorf("write spec: %w", err)
	}
	return nil
}

func readSpec(dir string) (*specs.Spec, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	var sp specs.Spec
	if err := json.Unmarshal(b, &sp); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	return &sp, nil
}
