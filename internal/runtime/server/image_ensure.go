package server

import (
	"context"

	"github.com/quantyroot/quantykube/internal/runtime/images"
)

// ensureImage returns the stored image for ref, pulling it when absent.
func (s *Service) ensureImage(ctx context.Context, ref string) (images.Image, error) {
	if im, ok := s.images.Lookup(ref); ok {
		return im, nil
	}
	return s.images.Pull(ctx, ref, nil)
}
