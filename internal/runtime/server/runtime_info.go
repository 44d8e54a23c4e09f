package server

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Version strings reported by Version.
const (
	RuntimeName    = "quantykube"
	RuntimeVersion = "0.1.0"
)

// Version reports the runtime and CRI API versions.
func (s *Service) Version(ctx context.Context, r *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: RuntimeName, RuntimeVersion: RuntimeVersion, RuntimeApiVersion: "v1"}, nil
}

// Status reports RuntimeReady (always, we answer) and NetworkReady (a CNI config exists).
func (s *Service) Status(ctx context.Context, r *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	netCond := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: true}
	if err := s.net.Ready(); err != nil {
		netCond.Status, netCond.Reason, netCond.Message = false, "NetworkPluginNotReady", err.Error()
	}
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, netCond}},
		RuntimeHandlers: []*runtimeapi.RuntimeHandler{{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: s.rro}}},
		Features:        &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true},
	}
	if r.Verbose {
		resp.Info = map[string]string{"config": mustJSON(s.cfg)}
	}
	return resp, nil
}

// RuntimeConfig tells kubelet the cgroup driver: always cgroupfs.
func (s *Service) RuntimeConfig(ctx context.Context, r *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}}, nil
}

// UpdateRuntimeConfig accepts the pod CIDR kubelet sends; CNI configs carry their own ranges.
func (s *Service) UpdateRuntimeConfig(ctx context.Context, r *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}
