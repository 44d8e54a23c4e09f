// Package standin builds critest's stand-in images from local files and pushes them into
// a registry under the repository paths critest pulls (scripts/critest/registry serves
// them for critest.sh; test/runtime serves them in-process).
//
// Invariants: every repository gets its own top layer (a file naming the repository), so
// different repositories are different images while several tags of one repository
// (test-image-tags:1/2/3) and one repository on two registries (pause:3.9) are one image.
package standin

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const (
	e2e  = "e2e-test-images/"
	cri  = "k8s-staging-cri-tools/"
	path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// Files are the prepared stand-in files (scripts/critest/standins.sh OUTDIR).
type Files struct {
	// BusyboxRoot is the busybox root filesystem (OUTDIR/rootfs).
	BusyboxRoot string
	// NonewPrivs, Pause and Webserver are the static probe, pause and nginx/httpd stand-in.
	NonewPrivs, Pause, Webserver string
}

// InDir names the files standins.sh prepared in dir.
func InDir(dir string) Files {
	return Files{BusyboxRoot: filepath.Join(dir, "rootfs"), NonewPrivs: filepath.Join(dir, "nonewprivs"),
		Pause: filepath.Join(dir, "pause"), Webserver: filepath.Join(dir, "webserver")}
}

type entry struct {
	repo string
	tags []string
	cfg  v1.Config
}

// busyboxImages are critest's busybox-based images: plain, web servers, users.
func busyboxImages() []entry {
	server := func(bin string, port int) v1.Config {
		return v1.Config{Entrypoint: []string{bin, "-port", fmt.Sprint(port), "-root", "/www"}}
	}
	return []entry{
		{e2e + "busybox", []string{"1.29-2", "1.29", "latest"}, v1.Config{}},
		{e2e + "nginx", []string{"1.14-2"}, server("/usr/sbin/nginx", 80)},
		{e2e + "httpd", []string{"2.4.39-4"}, server("/usr/local/bin/httpd", 80)},
		{cri + "hostnet-nginx-amd64", []string{"latest"}, server("/usr/sbin/nginx", 12003)},
		{cri + "test-image-user-uid", []string{"latest"}, v1.Config{User: "1002"}},
		{cri + "test-image-user-username", []string{"latest"}, v1.Config{User: "www-data"}},
		{cri + "test-image-user-uid-group", []string{"latest"}, v1.Config{User: "1003:33"}},
		{cri + "test-image-user-username-group", []string{"latest"}, v1.Config{User: "www-data:www-data"}},
		{cri + "test-image-predefined-group", []string{"latest"}, v1.Config{User: "1000"}},
		{cri + "test-image-latest", []string{"latest"}, v1.Config{}},
		{cri + "test-image-tag", []string{"test", "all"}, v1.Config{}},
		{cri + "test-image-1", []string{"latest"}, v1.Config{}},
		{cri + "test-image-2", []string{"latest"}, v1.Config{}},
		{cri + "test-image-3", []string{"latest"}, v1.Config{}},
		{cri + "test-image-tags", []string{"1", "2", "3"}, v1.Config{}},
	}
}

// Push builds every stand-in image from f and pushes it to the registry at addr
// (host:port, plain HTTP). It returns the number of repositories pushed.
func Push(addr string, f Files) (int, error) {
	base, err := dirLayer(f.BusyboxRoot)
	if err != nil {
		return 0, fmt.Errorf("busybox layer: %w", err)
	}
	webLayer, err := fileLayer(map[string]fileSpec{"usr/sbin/nginx": {src: f.Webserver, mode: 0o755}, "usr/local/bin/httpd": {src: f.Webserver, mode: 0o755}})
	if err != nil {
		return 0, err
	}
	entries := busyboxImages()
	for _, e := range entries {
		cfg := e.cfg
		if cfg.Cmd == nil && cfg.Entrypoint == nil {
			cfg.Cmd = []string{"sh"}
		}
		cfg.Env = []string{path}
		layers := []v1.Layer{base, marker(e.repo)}
		if cfg.Entrypoint != nil {
			layers = []v1.Layer{base, webLayer, marker(e.repo)}
		}
		img, err := image(cfg, layers...)
		if err != nil {
			return 0, err
		}
		if err := push(addr, img, e.repo, e.tags...); err != nil {
			return 0, err
		}
	}
	if err := pushProbeAndPause(addr, f, base); err != nil {
		return 0, err
	}
	return len(entries) + 2, nil
}

// pushProbeAndPause pushes the nonewprivs probe and the two pause images.
func pushProbeAndPause(addr string, f Files, base v1.Layer) error {
	nnpLayer, err := fileLayer(map[string]fileSpec{"usr/local/bin/nnp": {src: f.NonewPrivs, mode: 0o4755}})
	if err != nil {
		return err
	}
	img, err := image(v1.Config{Entrypoint: []string{"/usr/local/bin/nnp"}, Env: []string{path}}, base, nnpLayer, marker(e2e+"nonewprivs"))
	if err != nil {
		return err
	}
	if err := push(addr, img, e2e+"nonewprivs", "1.3"); err != nil {
		return err
	}
	pauseLayer, err := fileLayer(map[string]fileSpec{"pause": {src: f.Pause, mode: 0o755}})
	if err != nil {
		return err
	}
	// critest's pause:3.9 (pulled and removed by the image tests) and the runtime's own
	// sandbox image are different images, so removing one never untags the other.
	img, err = image(v1.Config{Entrypoint: []string{"/pause"}, Env: []string{path}}, pauseLayer)
	if err != nil {
		return err
	}
	if err := push(addr, img, "pause", "3.9"); err != nil {
		return err
	}
	img, err = image(v1.Config{Entrypoint: []string{"/pause"}, Env: []string{path}}, pauseLayer, marker("pause-sandbox"))
	if err != nil {
		return err
	}
	return push(addr, img, "pause", "3.10", "3.10.1", "3.10.2")
}

func push(addr string, img v1.Image, repo string, tags ...string) error {
	for _, t := range tags {
		ref, err := name.ParseReference(addr+"/"+repo+":"+t, name.Insecure)
		if err != nil {
			return err
		}
		if err := remote.Write(ref, img, remote.WithContext(context.Background())); err != nil {
			return fmt.Errorf("push %s: %w", ref, err)
		}
	}
	return nil
}

func image(cfg v1.Config, layers ...v1.Layer) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, fmt.Errorf("append layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Config = cfg
	cf.Created = v1.Time{Time: time.Unix(0, 0)}
	return mutate.ConfigFile(img, cf)
}

func marker(repo string) v1.Layer {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	body := []byte(repo + "\n")
	tw.WriteHeader(&tar.Header{Name: "etc/qk-stand-in", Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg})
	tw.Write(body)
	tw.Close()
	return bytesLayer(b.Bytes())
}

func bytesLayer(b []byte) v1.Layer {
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		panic(err)
	}
	return l
}

type fileSpec struct {
	src  string
	mode int64
}

func fileLayer(files map[string]fileSpec) (v1.Layer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for dst, f := range files {
		body, err := os.ReadFile(f.src)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f.src, err)
		}
		dir := filepath.Dir(dst)
		for _, d := range parents(dir) {
			tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)})
		}
		if err := tw.WriteHeader(&tar.Header{Name: dst, Mode: f.mode, Size: int64(len(body)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
		tw.Write(body)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return bytesLayer(b.Bytes()), nil
}

func parents(dir string) []string {
	if dir == "." || dir == "/" || dir == "" {
		return nil
	}
	return append(parents(filepath.Dir(dir)), dir)
}

// dirLayer tars root, keeping modes, owners, symlinks and hard links (busybox applets).
func dirLayer(root string) (v1.Layer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	inodes := map[uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = rel
		h.ModTime = time.Unix(0, 0)
		h.Uname, h.Gname = "", ""
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			h.Uid, h.Gid = int(st.Uid), int(st.Gid)
			if fi.Mode().IsRegular() && st.Nlink > 1 {
				if first, ok := inodes[st.Ino]; ok {
					h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
				} else {
					inodes[st.Ino] = rel
				}
			}
		}
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(tw, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("walk %s", root), err)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return bytesLayer(b.Bytes()), nil
}
