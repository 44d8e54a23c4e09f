package runtimemove

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	rtconfig "github.com/quantyroot/quantykube/internal/runtime/config"
)

func TestCheckCNI(t *testing.T) {
	d := t.TempDir()
	rc := rtconfig.Default()
	rc.CNIConfDir, rc.CNIBinDirs = filepath.Join(d, "net.d"), []string{filepath.Join(d, "bin")}
	if err := checkCNI(rc); err == nil || !strings.Contains(err.Error(), "no CNI configuration") {
		t.Fatalf("no config: %v", err)
	}
	os.MkdirAll(rc.CNIConfDir, 0o755)
	os.MkdirAll(rc.CNIBinDirs[0], 0o755)
	os.WriteFile(filepath.Join(rc.CNIConfDir, "10-x.conflist"), []byte(`{"plugins":[{"type":"bridge"},{"type":"portmap"}]}`), 0o644)
	os.WriteFile(filepath.Join(rc.CNIBinDirs[0], "bridge"), nil, 0o755)
	if err := checkCNI(rc); err == nil || !strings.Contains(err.Error(), `"portmap"`) {
		t.Fatalf("missing plugin: %v", err)
	}
	os.WriteFile(filepath.Join(rc.CNIBinDirs[0], "portmap"), nil, 0o755)
	if err := checkCNI(rc); err != nil {
		t.Fatal(err)
	}
}

func TestMetaRoundTrip(t *testing.T) {
	p := DefaultPaths()
	p.StateDir = t.TempDir()
	a := "unix:///run/containerd/containerd.sock"
	in := &meta{Node: "n1", OldEndpoint: a, OldRuntime: "containerd", Annotation: &a, Images: []string{"x:1"}}
	if err := p.writeMeta(in); err != nil {
		t.Fatal(err)
	}
	out, err := p.readMeta()
	if err != nil || out.Node != "n1" || out.Annotation == nil || *out.Annotation != a || out.Images[0] != "x:1" {
		t.Fatalf("got %+v, %v", out, err)
	}
}

func TestGracePeriod(t *testing.T) {
	for in, want := range map[string]int64{"": stopTimeout, "0": 0, "3": 3, "600": stopTimeout, "-1": stopTimeout} {
		ct := &runtimeapi.Container{Annotations: map[string]string{"io.kubernetes.pod.terminationGracePeriod": in}}
		if got := gracePeriod(ct); got != want {
			t.Errorf("%q: got %d, want %d", in, got, want)
		}
	}
}

func TestCheckLayerFSWalksUp(t *testing.T) {
	// A temp dir is not an overlay on a normal test host; the walk up from a
	// path that does not exist yet must not fail.
	if err := checkLayerFS(filepath.Join(t.TempDir(), "a", "b")); err != nil && !strings.Contains(err.Error(), "overlayfs") {
		t.Fatal(err)
	}
}

// TestNotDrained: the refusal (and so `install runtime --dry-run` on a node
// not drained yet) names the pods a drain evicts and those whose emptyDir
// data it deletes, and the kubectl drain that allows it.
func TestNotDrained(t *testing.T) {
	pod := func(name string, emptyDir bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
		p.Spec.Volumes = []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}}}
		if emptyDir {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}
		return p
	}
	got := notDrained("w1", []corev1.Pod{pod("b", true), pod("a", false)}).Error()
	want := "node w1 is not drained: default/a, default/b still run there (the drain deletes the emptyDir data of default/b); run `kubectl drain w1 --ignore-daemonsets --delete-emptydir-data` first"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	got = notDrained("w1", []corev1.Pod{pod("a", false)}).Error()
	want = "node w1 is not drained: default/a still run there; run `kubectl drain w1 --ignore-daemonsets` first"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
