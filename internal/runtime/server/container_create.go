package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/monitor"
	"github.com/quantyroot/quantykube/internal/runtime/oci"
	"github.com/quantyroot/quantykube/internal/runtime/store"
)

func containerName(c *runtimeapi.ContainerMetadata, p *runtimeapi.PodSandboxMetadata) string {
	return fmt.Sprintf("%s_%s_%s_%s_%d", c.Name, p.Name, p.Namespace, p.Uid, c.Attempt)
}

// CreateContainer prepares the rootfs and spec and has a monitor run `runc create`.
// The container is CREATED (not started) on success; on failure nothing is left.
func (s *Service) CreateContainer(ctx context.Context, r *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg := r.GetConfig()
	if err := validateContainerConfig(cfg); err != nil {
		return nil, err
	}
	sb, err := s.sandboxes.Resolve(r.PodSandboxId)
	if err != nil {
		return nil, notFound("sandbox", r.PodSandboxId)
	}
	if s.sandboxState(sb) != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, grpcErr(fmt.Errorf("sandbox %s is not ready: create a new sandbox", sb.ID))
	}
	id, name := newID(), containerName(cfg.GetMetadata(), sb.Config().GetMetadata())
	if err := s.containers.Reserve(name, id); err != nil {
		return nil, grpcErr(err)
	}
	var u undo
	defer u.Run()
	u.Add(func() { s.containers.Release(name, id) })
	release := s.images.Hold()
	defer release()
	img, ok := s.images.Lookup(cfg.GetImage().GetImage())
	if !ok {
		return nil, notFound("image", cfg.GetImage().GetImage())
	}
	imgCfg, err := s.images.Config(img.ID)
	if err != nil {
		return nil, grpcErr(err)
	}
	dir := s.containers.RecordDir(id)
	if err := makeRecordDir(&u, dir, "container", func() { s.cleanupContainerDir(id) }); err != nil {
		return nil, grpcErr(err)
	}
	c := &store.Container{ID: id, Name: name, SandboxID: sb.ID, CreatedAt: time.Now(),
		ImageRef: cfg.GetImage().GetImage(), ImageID: img.ID, Layers: img.Layers, Rootfs: filepath.Join(dir, "rootfs"),
		CgroupPath: filepath.Join(sb.CgroupParent, id)}
	if ld, lp := sb.Config().GetLogDirectory(), cfg.GetLogPath(); ld != "" && lp != "" {
		c.LogPath = filepath.Join(ld, lp)
	}
	if err := c.SetConfig(cfg); err != nil {
		return nil, grpcErr(err)
	}
	if err := s.createContainerTask(&u, c, sb, imgCfg); err != nil {
		return nil, grpcErr(err)
	}
	if err := s.containers.Put(c); err != nil {
		return nil, grpcErr(err)
	}
	u.Keep()
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

// validateContainerConfig refuses configs without a name or image and image volumes.
func validateContainerConfig(cfg *runtimeapi.ContainerConfig) error {
	if cfg.GetMetadata() == nil || cfg.GetMetadata().Name == "" {
		return invalid("container config needs metadata with a name")
	}
	if cfg.GetImage().GetImage() == "" {
		return invalid("container config needs an image")
	}
	for _, m := range cfg.GetMounts() {
		if m.GetImage().GetImage() != "" {
			return status.Errorf(codes.Unimplemented, "image volumes (mount of image %q) are not supported yet", m.GetImage().GetImage())
		}
	}
	return nil
}

// createContainerTask creates c's runc container under a monitor (createTask) and
// records its pid and user in c.
func (s *Service) createContainerTask(u *undo, c *store.Container, sb *store.Sandbox, imgCfg *v1.ConfigFile) error {
	cfg := c.Config()
	pid, spec, err := s.createTask(u, task{id: c.ID, dir: s.containers.RecordDir(c.ID), layers: c.Layers, rootfs: c.Rootfs,
		what: "container " + cfg.GetMetadata().Name,
		spec: func(host ...oci.SpecOpt) (*specs.Spec, error) { return s.containerSpec(c, sb, imgCfg, host) },
		monitor: monitor.Options{LogPath: c.LogPath, Terminal: cfg.GetTty(), Stdin: cfg.GetStdin(), StdinOnce: cfg.GetStdinOnce(),
			CgroupMemoryDir: s.cg.Dir("memory", c.CgroupPath)}})
	if err != nil {
		return err
	}
	c.User = &store.User{UID: spec.Process.User.UID, GID: spec.Process.User.GID, Groups: spec.Process.User.AdditionalGids}
	c.Pid = pid
	return nil
}

// containerSpec builds c's spec in sandbox sb (its namespaces and files); the rootfs is
// mounted. A refused config is InvalidArgument.
func (s *Service) containerSpec(c *store.Container, sb *store.Sandbox, imgCfg *v1.ConfigFile, host []oci.SpecOpt) (*specs.Spec, error) {
	cfg, sbCfg := c.Config(), sb.Config()
	nso := sbCfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	ns := oci.Namespaces{NetNS: sb.NetNS, PausePid: sb.PausePid,
		HostNet: nso.GetNetwork() == runtimeapi.NamespaceMode_NODE,
		HostIPC: nso.GetIpc() == runtimeapi.NamespaceMode_NODE,
		HostPID: nso.GetPid() == runtimeapi.NamespaceMode_NODE}
	if t := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetTargetId(); t != "" {
		if tc, err := s.containers.Resolve(t); err == nil {
			ns.TargetPid = tc.Pid
		}
	}
	hostname, _ := os.ReadFile(filepath.Join(s.sandboxes.RecordDir(sb.ID), "hostname"))
	extra := append([]oci.SpecOpt{oci.When(ns.HostNet, oci.WithHostname(""))}, host...)
	spec, err := oci.ContainerSpec(oci.ContainerInput{Config: cfg, Sandbox: sbCfg, Image: imgCfg, Rootfs: c.Rootfs,
		CgroupsPath: c.CgroupPath, NS: ns, Files: sandboxFiles(s.sandboxes.RecordDir(sb.ID), ns.HostIPC),
		Hostname: trimNL(string(hostname)), RecursiveReadOnly: s.rro}, extra...)
	if err != nil {
		return nil, invalid("container %s: %v", cfg.GetMetadata().Name, err)
	}
	return spec, nil
}

func trimNL(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

// cleanupContainerDir removes a container's mounts and files (for failed creates and orphans).
func (s *Service) cleanupContainerDir(id string) {
	dir := s.containers.RecordDir(id)
	s.fs.UnmountAll(filepath.Join(dir, "rootfs"))
	os.RemoveAll(s.rwDir(id))
	os.RemoveAll(dir)
}
