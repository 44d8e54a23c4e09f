package server

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/monitor"
	"github.com/quantyroot/quantykube/internal/runtime/store"
)

// sandboxState is READY while the sandbox was not stopped and its pause process lives.
func (s *Service) sandboxState(sb *store.Sandbox) runtimeapi.PodSandboxState {
	if !sb.Ready {
		return runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	}
	if _, ok, _ := monitor.ReadExit(s.sandboxes.RecordDir(sb.ID)); ok {
		return runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	}
	return runtimeapi.PodSandboxState_SANDBOX_READY
}

// PodSandboxStatus reports state, IPs and namespace modes.
func (s *Service) PodSandboxStatus(ctx context.Context, r *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	sb, err := s.sandboxes.Resolve(r.PodSandboxId)
	if err != nil {
		return nil, grpcErr(err)
	}
	cfg := sb.Config()
	st := &runtimeapi.PodSandboxStatus{
		Id:             sb.ID,
		Metadata:       cfg.GetMetadata(),
		State:          s.sandboxState(sb),
		CreatedAt:      sb.CreatedAt.UnixNano(),
		Labels:         cfg.GetLabels(),
		Annotations:    cfg.GetAnnotations(),
		RuntimeHandler: sb.RuntimeHandler,
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()}},
	}
	if sb.IP != "" {
		st.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: sb.IP}
		for _, ip := range sb.AdditionalIPs {
			st.Network.AdditionalIps = append(st.Network.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
		}
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: st}
	if r.Verbose {
		resp.Info = map[string]string{"info": mustJSON(map[string]any{"pid": sb.PausePid, "netns": sb.NetNS, "cgroupParent": sb.CgroupParent})}
	}
	for _, c := range s.containers.List() {
		if c.SandboxID == sb.ID {
			resp.ContainersStatuses = append(resp.ContainersStatuses, s.containerStatus(c))
		}
	}
	return resp, nil
}

// ListPodSandbox lists sandboxes matching the filter (id prefix, state, labels).
func (s *Service) ListPodSandbox(ctx context.Context, r *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f := r.GetFilter()
	out := []*runtimeapi.PodSandbox{}
	for _, sb := range s.sandboxes.List() {
		if f != nil && f.Id != "" && !hasPrefix(sb.ID, f.Id) {
			continue
		}
		state := s.sandboxState(sb)
		if f.GetState() != nil && f.GetState().State != state {
			continue
		}
		cfg := sb.Config()
		if !matchLabels(cfg.GetLabels(), f.GetLabelSelector()) {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{Id: sb.ID, Metadata: cfg.GetMetadata(), State: state,
			CreatedAt: sb.CreatedAt.UnixNano(), Labels: cfg.GetLabels(), Annotations: cfg.GetAnnotations(), RuntimeHandler: sb.RuntimeHandler})
	}
	return &runtimeapi.ListPodSandboxResponse{Items: out}, nil
}

func hasPrefix(id, p string) bool { return len(id) >= len(p) && id[:len(p)] == p }

func matchLabels(labels, sel map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
