package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/cni"
	"github.com/quantyroot/quantykube/internal/runtime/monitor"
	"github.com/quantyroot/quantykube/internal/runtime/netns"
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
	m := cfg.GetMetadata()
	if m == nil || m.Name == "" || m.Namespace == "" || m.Uid == "" {
		return nil, invalid("sandbox config needs metadata with name, namespace and uid")
	}
	if r.RuntimeHandler != "" {
		return nil, invalid("runtime handler %q is not configured: use the default handler (empty)", r.RuntimeHandler)
	}
	id := newID()
	name := sandboxName(m)
	if err := s.sandboxes.Reserve(name, id); err != nil {
		return nil, grpcErr(err)
	}
	var u undo
	defer u.Run()
	u.Add(func() { s.sandboxes.Release(name, id) })

	if _, err := s.ensureImage(ctx, s.cfg.PauseImage); err != nil {
		return nil, grpcErr(fmt.Errorf("pause image: %w", err))
	}
	release := s.images.Hold()
	defer release()
	img, ok := s.images.Lookup(s.cfg.PauseImage)
	if !ok {
		return nil, grpcErr(fmt.Errorf("pause image %s was removed while the sandbox was created: retry", s.cfg.PauseImage))
	}
	_ = s.images.SetPinned(img.ID, true)
	imgCfg, err := s.images.Config(img.ID)
	if err != nil {
		return nil, grpcErr(err)
	}
	dir := s.sandboxes.RecordDir(id)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, grpcErr(fmt.Errorf("create sandbox dir: %w", err))
	}
	u.Add(func() { s.cleanupSandboxDir(id) })

	nso := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	hostNet := nso.GetNetwork() == runtimeapi.NamespaceMode_NODE
	hostIPC := nso.GetIpc() == runtimeapi.NamespaceMode_NODE
	sb := &store.Sandbox{ID: id, Name: name, CreatedAt: time.Now(), RuntimeHandler: r.RuntimeHandler}
	if err := sb.SetConfig(cfg); err != nil {
		return nil, grpcErr(err)
	}

	if !hostNet {
		sb.NetNS = filepath.Join(s.cfg.StateDir, "netns", id)
		if err := netns.Create(sb.NetNS); err != nil {
			return nil, grpcErr(err)
		}
		u.Add(func() { netns.Remove(sb.NetNS) })
		pod := s.cniPod(sb)
		ips, err := s.net.Setup(ctx, pod)
		u.Add(func() {
			tctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.net.Teardown(tctx, pod); err != nil {
				slog.Warn("CNI teardown after failed sandbox", "id", id, "err", err)
			}
		})
		if err != nil {
			return nil, grpcErr(err)
		}
		sb.NetworkSetUp = true
		if len(ips) > 0 {
			sb.IP, sb.AdditionalIPs = ips[0], ips[1:]
		}
	}
	files := sandboxFiles(dir, hostIPC)
	if err := writeSandboxFiles(files, cfg, hostNet, sb.IP); err != nil {
		return nil, grpcErr(err)
	}

	sb.CgroupParent = cfg.GetLinux().GetCgroupParent()
	if sb.CgroupParent == "" {
		sb.CgroupParent = filepath.Join(s.cfg.CgroupParent, "pod-"+id)
		sb.OwnCgroupParent = true
	}
	u.Add(func() { s.removeSandboxCgroups(sb) })

	sb.Rootfs = filepath.Join(dir, "rootfs")
	sb.Layers = img.Layers
	if err := s.mountRootfs(id, img.Layers, sb.Rootfs); err != nil {
		return nil, grpcErr(err)
	}
	u.Add(func() { s.unmountRootfs(id, sb.Rootfs) })
	spec, err := oci.SandboxSpec(cfg, imgCfg, sb.Rootfs, filepath.Join(sb.CgroupParent, id), oci.Namespaces{NetNS: sb.NetNS, HostNet: hostNet}, files)
	if err != nil {
		return nil, grpcErr(err)
	}
	if !s.cg.HasController("hugetlb") {
		spec.Linux.Resources.HugepageLimits = nil
	}
	if err := writeSpec(dir, spec); err != nil {
		return nil, grpcErr(err)
	}
	pid, err := monitor.Spawn(s.exe, s.monitorArgs, monitor.Options{ID: id, Bundle: dir, Dir: dir,
		Runc: s.runc.Path, RuncRoot: s.runc.Root})
	if err != nil {
		return nil, grpcErr(fmt.Errorf("create pause container: %w", err))
	}
	u.Add(func() { s.runc.Delete(context.Background(), id, true) })
	if err := s.runc.Start(ctx, id); err != nil {
		return nil, grpcErr(fmt.Errorf("start pause container: %w", err))
	}
	sb.PausePid = pid
	sb.Ready = true
	if err := s.sandboxes.Put(sb); err != nil {
		return nil, grpcErr(err)
	}
	u.Keep()
	slog.Info("sandbox running", "id", id, "name", name, "ip", sb.IP)
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
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
	unmountAll(filepath.Join(dir, "shm"))
	unmountAll(filepath.Join(dir, "rootfs"))
	os.RemoveAll(s.rwDir(id))
	netns.Remove(filepath.Join(s.cfg.StateDir, "netns", id))
	os.RemoveAll(dir)
}
