package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/quantyroot/quantykube/internal/runtime/cni"
	"github.com/quantyroot/quantykube/internal/runtime/images"
	"github.com/quantyroot/quantykube/internal/runtime/monitor"
	"github.com/quantyroot/quantykube/internal/runtime/runc"
)

// The fakes below stand in for the host in the service's unit tests (the real components
// run in critest and test/runtime). Each records its calls in one shared journal, in
// order, as "component.Method arg..."; fail makes a method return an error until cleared.

type journal struct {
	mu    sync.Mutex
	calls []string
	errs  map[string]error
}

func newJournal() *journal { return &journal{errs: map[string]error{}} }

// call records a call and returns the error injected for its method, if any.
func (j *journal) call(method string, args ...any) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	parts := []string{method}
	for _, a := range args {
		parts = append(parts, fmt.Sprint(a))
	}
	j.calls = append(j.calls, strings.Join(parts, " "))
	return j.errs[method]
}

func (j *journal) fail(method string, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err == nil {
		delete(j.errs, method)
		return
	}
	j.errs[method] = err
}

// made lists the recorded calls that start with prefix.
func (j *journal) made(prefix string) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, c := range j.calls {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

func (j *journal) reset() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = nil
}

// fakeRunc knows the containers its monitors created until they are deleted.
type fakeRunc struct {
	j *journal
	// onKill runs for every successful Kill: tests make the monitor record the exit here.
	onKill func(id string, sig syscall.Signal)
	rro    bool
}

func (r *fakeRunc) Start(_ context.Context, id string) error {
	return r.j.call("runc.Start", id)
}

func (r *fakeRunc) Kill(_ context.Context, id string, sig syscall.Signal, all bool) error {
	if err := r.j.call("runc.Kill", id, int(sig), all); err != nil {
		return err
	}
	if r.onKill != nil {
		r.onKill(id, sig)
	}
	return nil
}

func (r *fakeRunc) Delete(_ context.Context, id string, force bool) error {
	return r.j.call("runc.Delete", id, force)
}

func (r *fakeRunc) State(_ context.Context, id string) (runc.State, error) {
	if err := r.j.call("runc.State", id); err != nil {
		return runc.State{}, err
	}
	return runc.State{ID: id, Status: "running"}, nil
}

func (r *fakeRunc) Update(_ context.Context, id string, _ *specs.LinuxResources) error {
	return r.j.call("runc.Update", id)
}

func (r *fakeRunc) ExecCommand(ctx context.Context, id string, p *specs.Process, _, _, _ string) (*exec.Cmd, error) {
	if err := r.j.call("runc.ExecCommand", id, strings.Join(p.Args, " ")); err != nil {
		return nil, err
	}
	return exec.CommandContext(ctx, "true"), nil
}

func (r *fakeRunc) SupportsMountOption(_ context.Context, opt string) bool {
	return opt == "rro" && r.rro
}

// fakeMonitors "creates" containers: it checks the bundle and returns a pid.
type fakeMonitors struct {
	j    *journal
	last monitor.Options
	pid  int
}

func (m *fakeMonitors) Spawn(o monitor.Options) (int, error) {
	if err := m.j.call("monitor.Spawn", o.ID); err != nil {
		return 0, err
	}
	if _, err := os.Stat(filepath.Join(o.Bundle, "config.json")); err != nil {
		return 0, fmt.Errorf("fake runc create: no bundle: %w", err)
	}
	m.last = o
	m.pid++
	return 1000 + m.pid, nil
}

type fakeNetwork struct {
	j   *journal
	ips []string
}

func (n *fakeNetwork) Setup(_ context.Context, p cni.Pod) ([]string, error) {
	if err := n.j.call("cni.Setup", p.ID); err != nil {
		return nil, err
	}
	return n.ips, nil
}

func (n *fakeNetwork) Teardown(_ context.Context, p cni.Pod) error {
	return n.j.call("cni.Teardown", p.ID)
}

func (n *fakeNetwork) Ready() error { return n.j.call("cni.Ready") }

// fakeFS keeps the mounts and pinned namespaces it made; a pinned namespace is a file.
type fakeFS struct {
	j      *journal
	mu     sync.Mutex
	mounts map[string]string // target -> kind
}

func (f *fakeFS) mount(kind, target string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mounts[target] = kind
}

func (f *fakeFS) unmount(target string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.mounts, target)
}

// mounted lists the mount targets, sorted.
func (f *fakeFS) mounted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for t, kind := range f.mounts {
		out = append(out, kind+" "+t)
	}
	slices.Sort(out)
	return out
}

func (f *fakeFS) MountOverlay(lower []string, upper, work, target string) error {
	if err := f.j.call("fs.MountOverlay", target); err != nil {
		return err
	}
	f.mount("overlay", target)
	return nil
}

func (f *fakeFS) MountShm(dir string) error {
	if err := f.j.call("fs.MountShm", dir); err != nil {
		return err
	}
	f.mount("shm", dir)
	return nil
}

func (f *fakeFS) Unmount(target string) error {
	if err := f.j.call("fs.Unmount", target); err != nil {
		return err
	}
	f.unmount(target)
	return nil
}

func (f *fakeFS) UnmountAll(p string) {
	f.j.call("fs.UnmountAll", p)
	f.unmount(p)
}

func (f *fakeFS) CreateNetNS(path string) error {
	if err := f.j.call("fs.CreateNetNS", path); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f.mount("netns", path)
	return os.WriteFile(path, nil, 0o444)
}

func (f *fakeFS) RemoveNetNS(path string) error {
	if err := f.j.call("fs.RemoveNetNS", path); err != nil {
		return err
	}
	f.unmount(path)
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// fakeImages holds images by tag; layers are empty directories under root.
type fakeImages struct {
	j      *journal
	root   string
	mu     sync.Mutex
	images map[string]images.Image // by tag
	config map[string]*v1.ConfigFile
}

func (im *fakeImages) add(tag string, cfg v1.Config, layers ...string) images.Image {
	im.mu.Lock()
	defer im.mu.Unlock()
	img := images.Image{ID: "sha256:" + fmt.Sprintf("%064x", len(im.images)+1), RepoTags: []string{tag}, Layers: layers}
	im.images[tag] = img
	im.config[img.ID] = &v1.ConfigFile{Config: cfg}
	return img
}

func (im *fakeImages) Lookup(ref string) (images.Image, bool) {
	im.mu.Lock()
	defer im.mu.Unlock()
	if img, ok := im.images[ref]; ok {
		return img, true
	}
	for _, img := range im.images {
		if img.ID == ref {
			return img, true
		}
	}
	return images.Image{}, false
}

func (im *fakeImages) Config(id string) (*v1.ConfigFile, error) {
	im.mu.Lock()
	defer im.mu.Unlock()
	if c, ok := im.config[id]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("config of image %s: %w", id, images.ErrNotFound)
}

func (im *fakeImages) Pull(_ context.Context, ref string, _ *images.Auth) (images.Image, error) {
	if err := im.j.call("images.Pull", ref); err != nil {
		return images.Image{}, err
	}
	if img, ok := im.Lookup(ref); ok {
		return img, nil
	}
	return images.Image{}, fmt.Errorf("pull %s: %w", ref, images.ErrNotFound)
}

func (im *fakeImages) Hold() func()                  { return func() {} }
func (im *fakeImages) SetPinned(string, bool) error  { return nil }
func (im *fakeImages) LayerDir(diffID string) string { return filepath.Join(im.root, diffID) }
func (im *fakeImages) List() []images.Image          { return nil }
func (im *fakeImages) Remove(string, []string) error { return nil }
func (im *fakeImages) FsUsage() (images.Usage, error) {
	return images.Usage{}, nil
}
