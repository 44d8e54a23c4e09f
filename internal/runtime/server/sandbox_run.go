package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/cni"
	"github.com/quantyroot/quantykube/internal/runtime/images"
	"github.com/quantyroot/quantykube/internal/runtime/oci"
	"github.com/quantyroot/quantykube/internal/runtime/store"
)

func sandboxName(m *runtimeapi.PodSandboxMetadata) string {
	return fmt.Sprintf("%s_%s_%s_%d", m.Name, m.Namespace, m.Uid, m.Attempt)
}

// RunPodSandbox creates the pod's namespaces, network and pause process. On any error
// everything made so far is undone (netns, CNI allocation, mounts, cgroups, records).
func (s *Service) RunPodSandbox(ctx context.Context, r *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	cfg := r.GetConfig()
	if m := cfg.GetMetadata(); m == nil || m.Name == "" || m.Namespace == "" || m.Uid == "" {
		return nil, invalid("sandbox config needs metadata with name, namespace and uid")
	}
	if r.RuntimeHandler != "" {
		return nil, invalid("runtime handler %q is not configured: use the default handler (empty)", r.RuntimeHandler)
	}
	id, name := newID(), sandboxName(cfg.GetMetadata())
	if err := s.sandboxes.Reserve(name, id); err != nil {
		return nil, grpcErr(err)
	}
	var u undo
	defer u.Run()
	u.Add(func() { s.sandboxes.Release(name, id) })
	img, imgCfg, release, err := s.pauseImage(ctx)
	if err != nil {
		return nil, grpcErr(err)
	}
	defer release()
	dir := s.sandboxes.RecordDir(id)
	if err := makeRecordDir(&u, dir, "sandbox", func() { s.cleanupSandboxDir(id) }); err != nil {
		return nil, grpcErr(err)
	}
	sb := &store.Sandbox{ID: id, Name: name, CreatedAt: time.Now(), RuntimeHandler: r.RuntimeHandler}
	if err := sb.SetConfig(cfg); err != nil {
		return nil, grpcErr(err)
	}
	if err := s.startPause(ctx, &u, sb, img, imgCfg); err != nil {
		return nil, grpcErr(err)
	}
	if err := s.sandboxes.Put(sb); err != nil {
		return nil, grpcErr(err)
	}
	u.Keep()
	slog.Info("sandbox running", "id", id, "name", name, "ip", sb.IP)
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

// pauseImage pulls the pause image when missing, pins it and holds layer collection off
// until release.
func (s *Service) pauseImage(ctx context.Context) (images.Image, *v1.ConfigFile, func(), error) {
	if _, err := s.ensureImage(ctx, s.cfg.PauseImage); err != nil {
		return images.Image{}, nil, nil, fmt.Errorf("pause image: %w", err)
	}
	release := s.images.Hold()
	img, ok := s.images.Lookup(s.cfg.PauseImage)
	if !ok {
		release()
		return images.Image{}, nil, nil, fmt.Errorf("pause image %s was removed while the sandbox was created: retry", s.cfg.PauseImage)
	}
	_ = s.images.SetPinned(img.ID, true)
	imgCfg, err := s.images.Config(img.ID)
	if err != nil {
		release()
		return images.Image{}, nil, nil, err
	}
	return img, imgCfg, release, nil
}

// startPause gives sb its network, pod files and cgroup parent, then creates and starts
// the pause container. Every step registers its undo on u.
func (s *Service) startPause(ctx context.Context, u *undo, sb *store.Sandbox, img images.Image, imgCfg *v1.ConfigFile) error {
	cfg := sb.Config()
	nso := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	hostNet := nso.GetNetwork() == runtimeapi.NamespaceMode_NODE
	if !hostNet {
		if err := s.setupNetwork(ctx, u, sb); err != nil {
			return err
		}
	}
	dir := s.sandboxes.RecordDir(sb.ID)
	files := sandboxFiles(dir, nso.GetIpc() == runtimeapi.NamespaceMode_NODE)
	if err := s.writeSandboxFiles(files, cfg, hostNet, sb.IP); err != nil {
		return err
	}
	sb.CgroupParent = cfg.GetLinux().GetCgroupParent()
	if sb.CgroupParent == "" {
		sb.CgroupParent = filepath.Join(s.cfg.CgroupParent, "pod-"+sb.ID)
		sb.OwnCgroupParent = true
	}
	u.Add(func() { s.removeSandboxCgroups(sb) })
	sb.Rootfs, sb.Layers = filepath.Join(dir, "rootfs"), img.Layers
	ns := oci.Namespaces{NetNS: sb.NetNS, HostNet: hostNet}
	pid, _, err := s.createTask(u, task{id: sb.ID, dir: dir, layers: img.Layers, rootfs: sb.Rootfs, what: "pause container",
		spec: func(host ...oci.SpecOpt) (*specs.Spec, error) {
			return oci.SandboxSpec(cfg, imgCfg, sb.Rootfs, filepath.Join(sb.CgroupParent, sb.ID), ns, files, host...)
		}})
	if err != nil {
		return err
	}
	if err := s.runc.Start(ctx, sb.ID); err != nil {
		return fmt.Errorf("start pause container: %w", err)
	}
	sb.PausePid, sb.Ready = pid, true
	return nil
}

// setupNetwork pins the sandbox's network namespace and attaches it (CNI ADD); the
// teardown (CNI DEL) is registered before ADD's result is known, so a failed ADD releases
// what the plugins allocated.
func (s *Service) setupNetwork(ctx context.Context, u *undo, sb *store.Sandbox) error {
	sb.NetNS = filepath.Join(s.cfg.StateDir, "netns", sb.ID)
	if err := s.fs.CreateNetNS(sb.NetNS); err != nil {
		return err
	}
	u.Add(func() { s.fs.RemoveNetNS(sb.NetNS) })
	pod := s.cniPod(sb)
	ips, err := s.net.Setup(ctx, pod)
	u.Add(func() {
		tctx, cancel := context.WithTimeout(context.Background(), s.timeouts.cniTeardown)
		defer cancel()
		if err := s.net.Teardown(tctx, pod); err != nil {
			slog.Warn("CNI teardown after failed sandbox", "id", sb.ID, "err", err)
		}
	})
	if err != nil {
		return err
	}
	sb.NetworkSetUp = true
	if len(ips) > 0 {
		sb.IP, sb.AdditionalIPs = ips[0], ips[1:]
	}
	return nil
}

func (s *Service) cniPod(sb *store.Sandbox) cni.Pod {
	m := sb.Config().GetMetadata()
	p := cni.Pod{ID: sb.ID, NetNS: sb.NetNS, Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUid()}
	for _, pm := range sb.Config().GetPortMappings() {
		if pm.HostPort <= 0 {
			continue
		}
		proto := "tcp"
		switch pm.Protocol {
		case runtimeapi.Protocol_UDP:
			proto = "udp"
		case runtimeapi.Protocol_SCTP:
			proto = "sctp"
		}
		p.Ports = append(p.Ports, cni.PortMapping{HostPort: pm.HostPort, ContainerPort: pm.ContainerPort, Protocol: proto, HostIP: pm.HostIp})
	}
	return p
}

// removeSandboxCgroups removes the pause cgroup and, when the runtime created it, the parent.
func (s *Service) removeSandboxCgroups(sb *store.Sandbox) {
	stop := filepath.Dir(sb.CgroupParent)
	if !sb.OwnCgroupParent {
		stop = sb.CgroupParent
	}
	if err := s.cg.Remove(filepath.Join(sb.CgroupParent, sb.ID), stop); err != nil {
		slog.Debug("remove sandbox cgroups", "id", sb.ID, "err", err)
	}
}

// cleanupSandboxDir removes what a sandbox directory may hold: mounts, then files.
func (s *Service) cleanupSandboxDir(id string) {
	dir := s.sandboxes.RecordDir(id)
	s.fs.UnmountAll(filepath.Join(dir, "shm"))
	s.fs.UnmountAll(filepath.Join(dir, "rootfs"))
	os.RemoveAll(s.rwDir(id))
	s.fs.RemoveNetNS(filepath.Join(s.cfg.StateDir, "netns", id))
	os.RemoveAll(dir)
}
