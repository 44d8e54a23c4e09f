package images

import (
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Import loads every tagged image of a docker-archive tarball (`docker save`, `ctr
// images export`, scripts/mkimage) into the store under its tags. It is safe while a
// runtime uses the same store (see Store.update). It returns the stored images.
func (s *Store) Import(path string) ([]Image, error) {
	opener := func() (io.ReadCloser, error) { return os.Open(path) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, fmt.Errorf("read manifest of %s (is it a docker-archive tarball?): %w", path, err)
	}
	var out []Image
	for _, d := range m {
		if len(d.RepoTags) == 0 {
			return nil, fmt.Errorf("%s holds an image without a tag: tag it when saving", path)
		}
		for _, t := range d.RepoTags {
			tag, err := name.NewTag(t, name.WeakValidation)
			if err != nil {
				return nil, fmt.Errorf("tag %q in %s: %w", t, path, err)
			}
			img, err := tarball.Image(opener, &tag)
			if err != nil {
				return nil, fmt.Errorf("open %s in %s: %w", t, path, err)
			}
			r, err := ParseRef(t)
			if err != nil {
				return nil, err
			}
			dg, err := img.Digest()
			if err != nil {
				return nil, fmt.Errorf("digest of %s: %w", t, err)
			}
			im, err := s.store(r, dg.String(), img)
			if err != nil {
				return nil, fmt.Errorf("import %s: %w", t, err)
			}
			out = append(out, im)
		}
	}
	return out, nil
}
