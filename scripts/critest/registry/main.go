// Command registry serves critest's images offline: it builds stand-ins from local files,
// pushes them into an in-memory registry (go-containerregistry's pkg/registry) under the
// repository paths critest pulls, and serves them on -addr until killed. The runtime
// reaches it through registry mirrors, so the images keep their upstream names.
//
// Invariants: every repository gets its own top layer (a file naming the repository), so
// different repositories are different images while several tags of one repository
// (test-image-tags:1/2/3) and one repository on two registries (pause:3.9) are one image.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
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

func main() {
	addr := flag.String("addr", "127.0.0.1:5000", "listen address")
	root := flag.String("busybox-root", "", "directory with the busybox root filesystem (required)")
	nnp := flag.String("nonewprivs", "", "nonewprivs probe binary (required)")
	pause := flag.String("pause", "", "pause binary (required)")
	web := flag.String("webserver", "", "nginx/httpd stand-in binary (required)")
	ready := flag.String("ready-file", "", "file written once every image is pushed")
	flag.Parse()
	if *root == "" || *nnp == "" || *pause == "" || *web == "" {
		fmt.Fprintln(os.Stderr, "registry: -busybox-root, -nonewprivs, -pause and -webserver are required (scripts/critest.sh passes them)")
		os.Exit(2)
	}
	if err := run(*addr, *root, *nnp, *pause, *web, *ready); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

func run(addr, root, nnp, pause, web, ready string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)

	base, err := dirLayer(root)
	if err != nil {
		return fmt.Errorf("busybox layer: %w", err)
	}
	webLayer, err := fileLayer(map[string]fileSpec{"usr/sbin/nginx": {src: web, mode: 0o755}, "usr/local/bin/httpd": {src: web, mode: 0o755}})
	if err != nil {
		return err
	}
	busybox := func(repo string, cfg v1.Config) (v1.Image, error) {
		if cfg.Cmd == nil && cfg.Entrypoint == nil {
			cfg.Cmd = []string{"sh"}
		}
		cfg.Env = []string{path}
		if cfg.Entrypoint != nil {
			return image(cfg, base, webLayer, marker(repo))
		}
		return image(cfg, base, marker(repo))
	}
	server := func(bin string, port int) v1.Config {
		return v1.Config{Entrypoint: []string{bin, "-port", fmt.Sprint(port), "-root", "/www"}}
	}
	type entry struct {
		repo string
		tags []string
		cfg  v1.Config
	}
	entries := []entry{
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
	push := func(img v1.Image, repo string, tags ...string) error {
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
	for _, e := range entries {
		img, err := busybox(e.repo, e.cfg)
		if err != nil {
			return err
		}
		if err := push(img, e.repo, e.tags...); err != nil {
			return err
		}
	}
	nnpLayer, err := fileLayer(map[string]fileSpec{"usr/local/bin/nnp": {src: nnp, mode: 0o4755}})
	if err != nil {
		return err
	}
	img, err := image(v1.Config{Entrypoint: []string{"/usr/local/bin/nnp"}, Env: []string{path}}, base, nnpLayer, marker(e2e+"nonewprivs"))
	if err != nil {
		return err
	}
	if err := push(img, e2e+"nonewprivs", "1.3"); err != nil {
		return err
	}
	pauseLayer, err := fileLayer(map[string]fileSpec{"pause": {src: pause, mode: 0o755}})
	if err != nil {
		return err
	}
	// critest's pause:3.9 (pulled and removed by the image tests) and the runtime's own
	// sandbox image are different images, so removing one never untags the other.
	img, err = image(v1.Config{Entrypoint: []string{"/pause"}, Env: []string{path}}, pauseLayer)
	if err != nil {
		return err
	}
	if err := push(img, "pause", "3.9"); err != nil {
		return err
	}
	img, err = image(v1.Config{Entrypoint: []string{"/pause"}, Env: []string{path}}, pauseLayer, marker("pause-sandbox"))
	if err != nil {
		return err
	}
	if err := push(img, "pause", "3.10", "3.10.1", "3.10.2"); err != nil {
		return err
	}
	slog.Info("stand-in images pushed", "addr", addr, "repositories", len(entries)+2)
	if ready != "" {
		if err := os.WriteFile(ready, []byte(addr+"\n"), 0o644); err != nil {
			return fmt.Errorf("write ready file: %w", err)
		}
	}
	select {}
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
