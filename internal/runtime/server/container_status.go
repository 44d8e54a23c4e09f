package server

import (
	"context"
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/monitor"
	"github.com/quantyroot/quantykube/internal/runtime/store"
)

// containerState derives the CRI state: EXITED once the monitor wrote exit.json, RUNNING
// after a successful start, else CREATED.
func (s *Service) containerState(c *store.Container) runtimeapi.ContainerState {
	if _, ok, _ := monitor.ReadExit(s.containers.RecordDir(c.ID)); ok {
		return runtimeapi.ContainerState_CONTAINER_EXITED
	}
	if c.StartedAt.IsZero() {
		return runtimeapi.ContainerState_CONTAINER_CREATED
	}
	return runtimeapi.ContainerState_CONTAINER_RUNNING
}

func (s *Service) containerStatus(c *store.Container) *runtimeapi.ContainerStatus {
	cfg := c.Config()
	st := &runtimeapi.ContainerStatus{
		Id:          c.ID,
		Metadata:    cfg.GetMetadata(),
		State:       s.containerState(c),
		CreatedAt:   c.CreatedAt.UnixNano(),
		Image:       &runtimeapi.ImageSpec{Image: c.ImageRef, Annotations: cfg.GetImage().GetAnnotations()},
		ImageRef:    c.ImageID,
		ImageId:     c.ImageID,
		Labels:      cfg.GetLabels(),
		Annotations: cfg.GetAnnotations(),
		LogPath:     c.LogPath,
		Resources:   &runtimeapi.ContainerResources{Linux: cfg.GetLinux().GetResources()},
	}
	if im, ok := s.images.Lookup(c.ImageID); ok && len(im.RepoTags) > 0 {
		st.Image.Image = im.RepoTags[0]
		if len(im.RepoDigests) > 0 {
			st.ImageRef = im.RepoDigests[0]
		}
	}
	if c.User != nil {
		lu := &runtimeapi.LinuxContainerUser{Uid: int64(c.User.UID), Gid: int64(c.User.GID)}
		for _, g := range c.User.Groups {
			lu.SupplementalGroups = append(lu.SupplementalGroups, int64(g))
		}
		slices.Sort(lu.SupplementalGroups)
		st.User = &runtimeapi.ContainerUser{Linux: lu}
	}
	if !c.StartedAt.IsZero() {
		st.StartedAt = c.StartedAt.UnixNano()
	}
	for _, m := range cfg.GetMounts() {
		st.Mounts = append(st.Mounts, m)
	}
	if e, ok, _ := monitor.ReadExit(s.containers.RecordDir(c.ID)); ok {
		st.FinishedAt = e.FinishedAt.UnixNano()
		st.ExitCode = e.Code
		st.Reason = e.Reason
		if st.Reason == "" {
			if e.Code == 0 {
				st.Reason = "Completed"
			} else {
				st.Reason = "Error"
			}
		}
		if st.StartedAt == 0 {
			st.Reason = "ContainerCannotRun"
		}
	}
	return st
}

// ContainerStatus reports one container.
func (s *Service) ContainerStatus(ctx context.Context, r *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	c, err := s.containers.Resolve(r.ContainerId)
	if err != nil {
		return nil, notFound("container", r.ContainerId)
	}
	resp := &runtimeapi.ContainerStatusResponse{Status: s.containerStatus(c)}
	if r.Verbose {
		resp.Info = map[string]string{"info": mustJSON(map[string]any{"pid": c.Pid, "sandboxID": c.SandboxID, "rootfs": c.Rootfs})}
	}
	return resp, nil
}

// ListContainers lists containers matching the filter (id prefix, state, sandbox, labels).
func (s *Service) ListContainers(ctx context.Context, r *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	f := r.GetFilter()
	out := []*runtimeapi.Container{}
	for _, c := range s.containers.List() {
		if f.GetId() != "" && !hasPrefix(c.ID, f.GetId()) {
			continue
		}
		if f.GetPodSandboxId() != "" && !hasPrefix(c.SandboxID, f.GetPodSandboxId()) {
			continue
		}
		state := s.containerState(c)
		if f.GetState() != nil && f.GetState().State != state {
			continue
		}
		cfg := c.Config()
		if !matchLabels(cfg.GetLabels(), f.GetLabelSelector()) {
			continue
		}
		st := s.containerStatus(c)
		out = append(out, &runtimeapi.Container{Id: c.ID, PodSandboxId: c.SandboxID, Metadata: cfg.GetMetadata(),
			Image: st.Image, ImageRef: st.ImageRef, ImageId: c.ImageID, State: state, CreatedAt: c.CreatedAt.UnixNano(),
			Labels: cfg.GetLabels(), Annotations: cfg.GetAnnotations()})
	}
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}
