package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

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
	if cfg.GetMetadata() == nil || cfg.GetMetadata().Name == "" {
		return nil, invalid("container config needs metadata with a name")
	}
	if cfg.GetImage().GetImage() == "" {
		return nil, invalid("container config needs an image")
	}
	for _, m := range cfg.GetMounts() {
		if m.GetImage().GetImage() != "" {
			return nil, status.Errorf(codes.Unimplemented, "image volumes (mount of image %q) are not supported yet", m.GetImage().GetImage())
		}
	}
	sb, err := s.sandboxes.Resolve(r.PodSandboxId)
	if err != nil {
		return nil, notFound("sandbox", r.PodSandboxId)
	}
	if s.sandboxState(sb) != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, grpcErr(fmt.Errorf("sandbox %s is not ready: create a new sandbox", sb.ID))
	}
	sbCfg := sb.Config()
	id := newID()
	name := containerName(cfg.GetMetadata(), sbCfg.GetMetadata())
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
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, grpcErr(fmt.Errorf("create container dir: %w", err))
	}
	u.Add(func() { s.cleanupContainerDir(id) })

	c := &store.Container{ID: id, Name: name, SandboxID: sb.ID, CreatedAt: time.Now(),
		ImageRef: cfg.GetImage().GetImage(), ImageID: img.ID, Layers: img.Layers, Rootfs: filepath.Join(dir, "rootfs"),
		CgroupPath: filepath.Join(sb.CgroupParent, id)}
	if ld, lp := sbCfg.GetLogDirectory(), cfg.GetLogPath(); ld != "" && lp != "" {
		c.LogPath = filepath.Join(ld, lp)
	}
	if err := c.SetConfig(cfg); err != nil {
		return nil, grpcErr(err)
	}
	if err := s.mountRootfs(id, img.Layers, c.Rootfs); err != nil {
		return nil, grpcErr(err)
	}
	u.Add(func() { s.unmountRootfs(id, c.Rootfs) })

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
	spec, err := oci.ContainerSpec(oci.ContainerInput{Config: cfg, Sandbox: sbCfg, Image: imgCfg, Rootfs: c.Rootfs,
		CgroupsPath: c.CgroupPath, NS: ns, Files: sandboxFiles(s.sandboxes.RecordDir(sb.ID), ns.HostIPC),
		Hostname: trimNL(string(hostname)), RecursiveReadOnly: s.rro})
	if err != nil {
		return nil, invalid("container %s: %v", cfg.GetMetadata().Name, err)
	}
	if ns.HostNet {
		spec.Hostname = ""
	}
	if !s.cg.HasController("hugetlb") {
		// kubelet sends hugetlb limits (often 0) for every page size; without a hugetlb
		// controller runc would refuse to create the container.
		spec.Linux.Resources.HugepageLimits = nil
	}
	if err := writeSpec(dir, spec); err != nil {
		return nil, grpcErr(err)
	}
	c.User = &store.User{UID: spec.Process.User.UID, GID: spec.Process.User.GID, Groups: spec.Process.User.AdditionalGids}
	pid, err := monitor.Spawn(s.exe, s.monitorArgs, monitor.Options{ID: id, Bundle: dir, Dir: dir, LogPath: c.LogPath,
		Runc: s.runc.Path, RuncRoot: s.runc.Root, Terminal: cfg.GetTty(), Stdin: cfg.GetStdin(), StdinOnce: cfg.GetStdinOnce(),
		CgroupMemoryDir: s.cg.Dir("memory", c.CgroupPath)})
	if err != nil {
		return nil, grpcErr(fmt.Errorf("create container %s: %w", cfg.GetMetadata().Name, err))
	}
	u.Add(func() { s.runc.Delete(context.Background(), id, true) })
	c.Pid = pid
	if err := s.containers.Put(c); err != nil {
		return nil, grpcErr(err)
	}
	u.Keep()
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
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
	unmountAll(filepath.Join(dir, "rootfs"))
	os.RemoveAll(s.rwDir(id))
	os.RemoveAll(dir)
}
