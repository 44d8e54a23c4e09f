package runtimemove

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	rtconfig "github.com/quantyroot/quantykube/internal/runtime/config"
	"github.com/quantyroot/quantykube/internal/runtime/images"
)

// prepull makes every image in refs present in the new runtime before
// anything stops: from ImageArchives tarballs, else exported from the old
// runtime with ctr (containerd), else pulled through the new runtime's CRI.
// The old runtime's store is only read.
func (m *Mover) prepull(ctx context.Context, refs []string) error {
	rc, err := rtconfig.Load(m.Paths.RuntimeConfig)
	if err != nil {
		return err
	}
	c, err := dialCRI(m.meta.NewEndpoint)
	if err != nil {
		return err
	}
	defer c.Close()
	missing := func() ([]string, error) {
		var out []string
		for _, r := range refs {
			ok, err := c.hasImage(ctx, r)
			if err != nil {
				return nil, err
			}
			if !ok {
				out = append(out, r)
			}
		}
		return out, nil
	}
	miss, err := missing()
	if err != nil || len(miss) == 0 {
		return err
	}
	st, err := images.Open(filepath.Join(rc.RootDir, "images"), rtconfig.Registry{}) // only imports: pulls go through the runtime's CRI
	if err != nil {
		return fmt.Errorf("open the runtime's image store: %w", err)
	}
	if m.Paths.ImageArchives != "" {
		tars, _ := filepath.Glob(filepath.Join(m.Paths.ImageArchives, "*.tar"))
		for _, t := range tars {
			if _, err := st.Import(t); err != nil {
				m.Log.Warn("import image archive", "file", t, "err", err)
			}
		}
		if miss, err = missing(); err != nil || len(miss) == 0 {
			return err
		}
	}
	tmp := filepath.Join(m.Paths.StateDir, "export.tar")
	defer os.Remove(tmp)
	var failed []string
	for _, ref := range miss {
		if m.meta.OldRuntime == "containerd" {
			out, err := exec.CommandContext(ctx, m.Paths.CtrPath, "-a", socketPath(m.meta.OldEndpoint), "-n", "k8s.io", "images", "export", tmp, ref).CombinedOutput()
			if err == nil {
				if _, err = st.Import(tmp); err == nil {
					fmt.Fprintf(m.Out, "  %s copied from containerd\n", ref)
					continue
				}
			}
			m.Log.Info("export from containerd", "image", ref, "err", err, "out", strings.TrimSpace(string(out)))
		}
		if _, err := c.im.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
			failed = append(failed, fmt.Sprintf("%s (%v)", ref, err))
			continue
		}
		fmt.Fprintf(m.Out, "  %s pulled\n", ref)
	}
	if len(failed) > 0 {
		return fmt.Errorf("images the node's pods need are not in quantykube runtime: %s; import them with `quantykube runtime import` or pass --image-archives", strings.Join(failed, ", "))
	}
	return nil
}
