package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/images"
)

func (s *Service) toCRIImage(im images.Image) *runtimeapi.Image {
	out := &runtimeapi.Image{Id: im.ID, RepoTags: im.RepoTags, RepoDigests: im.RepoDigests, Size: im.Size, Pinned: im.Pinned,
		Spec: &runtimeapi.ImageSpec{Image: im.ID}}
	if out.RepoTags == nil {
		out.RepoTags = []string{}
	}
	if cfg, err := s.images.Config(im.ID); err == nil {
		user, _, _ := strings.Cut(cfg.Config.User, ":")
		if n, err := strconv.ParseInt(user, 10, 64); err == nil {
			out.Uid = &runtimeapi.Int64Value{Value: n}
		} else {
			out.Username = user
		}
	}
	return out
}

// ListImages lists stored images, optionally only those matching filter.image.
func (s *Service) ListImages(ctx context.Context, r *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	out := []*runtimeapi.Image{}
	if ref := r.GetFilter().GetImage().GetImage(); ref != "" {
		if im, ok := s.images.Lookup(ref); ok {
			out = append(out, s.toCRIImage(im))
		}
		return &runtimeapi.ListImagesResponse{Images: out}, nil
	}
	for _, im := range s.images.List() {
		out = append(out, s.toCRIImage(im))
	}
	return &runtimeapi.ListImagesResponse{Images: out}, nil
}

// ImageStatus returns the image, or an empty response when it is not present (not an error).
func (s *Service) ImageStatus(ctx context.Context, r *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	ref := r.GetImage().GetImage()
	if ref == "" {
		return nil, invalid("image status needs an image reference")
	}
	im, ok := s.images.Lookup(ref)
	if !ok {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	resp := &runtimeapi.ImageStatusResponse{Image: s.toCRIImage(im)}
	if r.Verbose {
		cfg, _ := s.images.Config(im.ID)
		resp.Info = map[string]string{"info": mustJSON(map[string]any{"imageSpec": cfg, "layers": im.Layers})}
	}
	return resp, nil
}

// replyMargin is the least time left before the caller's deadline for a
// pull's success to be worth sending.
const replyMargin = 10 * time.Millisecond

// pullTimeout bounds one pull, whatever the caller's deadline.
const pullTimeout = 30 * time.Minute

// PullImage pulls through the registry configuration's endpoints (config.Registry) and
// returns the image ID. The request's credentials (kubelet's, from the pod's image pull
// secrets) take precedence over configured ones for the image's own registry.
func (s *Service) PullImage(ctx context.Context, r *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := r.GetImage().GetImage()
	if ref == "" {
		return nil, invalid("pull needs an image reference")
	}
	var auth *images.Auth
	if a := r.GetAuth(); a != nil {
		auth = &images.Auth{Username: a.Username, Password: a.Password, Auth: a.Auth, IdentityToken: a.IdentityToken,
			RegistryToken: a.RegistryToken, ServerAddress: a.ServerAddress}
	}
	ctx, cancel := context.WithTimeout(ctx, pullTimeout)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return nil, grpcErr(fmt.Errorf("pull %s: %w", ref, err))
	}
	im, err := s.images.Pull(ctx, ref, auth)
	if err == nil {
		// The caller's deadline wins even when the pull itself made it: a client that gave
		// up must see DeadlineExceeded, not a late success. A success that would reach the
		// caller only after its deadline (less than replyMargin left) counts as late too;
		// otherwise a pull served from a local mirror races a very short deadline.
		err = ctx.Err()
		if d, ok := ctx.Deadline(); ok && err == nil && time.Until(d) < replyMargin {
			err = context.DeadlineExceeded
		}
	}
	if err != nil {
		return nil, grpcErr(fmt.Errorf("pull %s: %w", ref, err))
	}
	return &runtimeapi.PullImageResponse{ImageRef: im.ID}, nil
}

// RemoveImage removes an image; its layers stay while containers use them. Removing a
// missing image succeeds.
func (s *Service) RemoveImage(ctx context.Context, r *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	ref := r.GetImage().GetImage()
	if ref == "" {
		return nil, invalid("remove needs an image reference")
	}
	if err := s.images.Remove(ref, s.layersInUse()); err != nil {
		return nil, grpcErr(err)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

// layersInUse lists the layers under live containers' and sandboxes' rootfs mounts.
func (s *Service) layersInUse() []string {
	var out []string
	for _, c := range s.containers.List() {
		out = append(out, c.Layers...)
	}
	for _, sb := range s.sandboxes.List() {
		out = append(out, sb.Layers...)
	}
	return out
}

// ImageFsInfo reports the image filesystem's use so kubelet's image GC can work.
func (s *Service) ImageFsInfo(ctx context.Context, r *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	u, err := s.images.FsUsage()
	if err != nil {
		return nil, grpcErr(err)
	}
	fs := &runtimeapi.FilesystemUsage{Timestamp: time.Now().UnixNano(), FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: u.Mountpoint},
		UsedBytes: &runtimeapi.UInt64Value{Value: u.Bytes}, InodesUsed: &runtimeapi.UInt64Value{Value: u.Inodes}}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{fs}, ContainerFilesystems: []*runtimeapi.FilesystemUsage{fs}}, nil
}
