// Command registry is the kubeadm harness's image registry: it serves every
// image archive of a directory (the images `up` builds: docker-archives, and
// OCI archives such as scripts/image.sh's) from an
// in-memory registry (go-containerregistry's pkg/registry) until killed.
// Nodes reach it as a mirror of each image's upstream registry (containerd
// through /etc/containerd/certs.d, quantykube runtime through the mirrors of
// /etc/quantykube/runtime.toml), so images keep their upstream names and a
// node that lost an image pulls it again, as it would from a real registry.
//
// `registry -push -addr HOST:PORT ARCHIVE...` pushes archives to a running
// one instead, as a person pushes a release (the harness's e2e pushes
// scripts/release.sh's image this way).
//
// Invariant: a repository is served under its path without the registry
// host ("registry.k8s.io/pause:3.10.2" as "pause:3.10.2"), which is the path
// a mirror is asked for. Two upstream registries with one repository path
// would collide; the harness's images never do, and the command refuses it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5000", "listen address (with -push: the running registry's address)")
	dir := flag.String("dir", "", "directory of image archives (*.tar: docker-archive or OCI archive) to serve (required)")
	ready := flag.String("ready-file", "", "file written once every image is pushed")
	push := flag.Bool("push", false, "push the image archives named as arguments to the registry running on -addr, and exit")
	flag.Parse()
	if *push {
		if flag.NArg() == 0 {
			fmt.Fprintln(os.Stderr, "registry: -push needs the archives to push, e.g. -push -addr 172.30.233.1:5000 dist/quantykube.oci.tar")
			os.Exit(2)
		}
		n, err := pushAll(*addr, flag.Args())
		if err != nil {
			fmt.Fprintln(os.Stderr, "registry:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "registry: %d images pushed to %s\n", n, *addr)
		return
	}
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "registry: -dir is required, e.g. -dir .cache/kubeadm/state/images")
		os.Exit(2)
	}
	if err := run(*addr, *dir, *ready); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

func run(addr, dir, ready string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (another registry running? pick another QK_REGISTRY_PORT)", addr, err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()

	t0 := time.Now()
	tars, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil {
		return err
	}
	sort.Strings(tars)
	n, err := pushAll(l.Addr().String(), tars)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "registry: %d images from %s served on %s (pushed in %s)\n", n, dir, l.Addr(), time.Since(t0).Round(time.Millisecond))
	if ready != "" {
		if err := os.WriteFile(ready, []byte(l.Addr().String()+"\n"), 0o644); err != nil {
			return fmt.Errorf("write ready file: %w", err)
		}
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// pushAll pushes every tag of every tarball of tars, in order, to the
// registry at host, each under its repository path without the upstream
// registry (a mirror's path); the manifests keep their bytes, so a
// reference pinned by digest resolves on the registry too.
func pushAll(host string, tars []string) (int, error) {
	served := map[string]string{} // repository path -> upstream registry
	n := 0
	tmp, err := os.MkdirTemp("", "qk-registry-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	for _, t := range tars {
		imgs, err := archiveImages(t, tmp)
		if err != nil {
			return n, err
		}
		refs := make([]string, 0, len(imgs))
		for s := range imgs {
			refs = append(refs, s)
		}
		sort.Strings(refs)
		for _, s := range refs {
			tag, err := name.NewTag(s)
			if err != nil {
				return n, fmt.Errorf("%s: tag %q: %w", t, s, err)
			}
			repo := tag.RepositoryStr()
			if up, ok := served[repo]; ok && up != tag.RegistryStr() {
				return n, fmt.Errorf("%s: repository %q comes from both %s and %s; one mirror path cannot serve both", t, repo, up, tag.RegistryStr())
			}
			served[repo] = tag.RegistryStr()
			img, err := imgs[s]()
			if err != nil {
				return n, fmt.Errorf("%s: %s: %w", t, s, err)
			}
			dst, err := name.NewTag(host+"/"+repo+":"+tag.TagStr(), name.Insecure)
			if err != nil {
				return n, err
			}
			if err := remote.Write(dst, img, remote.WithContext(context.Background())); err != nil {
				return n, fmt.Errorf("push %s: %w", s, err)
			}
			n++
		}
	}
	return n, nil
}

// archiveImages lists the images of one archive by reference, each opened
// on demand: a docker-archive's RepoTags, or an OCI archive's ref names
// (unpacked below tmp).
func archiveImages(t, tmp string) (map[string]func() (v1.Image, error), error) {
	out := map[string]func() (v1.Image, error){}
	oci, err := isOCIArchive(t)
	if err != nil {
		return nil, err
	}
	if oci {
		imgs, err := ociImages(t, tmp)
		if err != nil {
			return nil, err
		}
		for ref, img := range imgs {
			out[ref] = func() (v1.Image, error) { return img, nil }
		}
		return out, nil
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(t) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	for _, d := range m {
		for _, s := range d.RepoTags {
			out[s] = func() (v1.Image, error) {
				tag, err := name.NewTag(s)
				if err != nil {
					return nil, err
				}
				return tarball.ImageFromPath(t, &tag)
			}
		}
	}
	return out, nil
}
