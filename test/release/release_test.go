package release

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository, from this package's directory.
const root = "../.."

// dist lists what release.sh writes, each compared byte for byte.
var dist = []string{"quantykube", "quantykube.oci.tar", "quantykube.yaml", "SHA256SUMS"}

// TestReleaseIsReproducible: release.sh from two clean clones of HEAD
// writes the same bytes, and the files agree with each other.
func TestReleaseIsReproducible(t *testing.T) {
	head := git(t, root, "rev-parse", "HEAD")
	tmp := t.TempDir()
	var outs []string
	for _, name := range []string{"a", "b"} {
		src := filepath.Join(tmp, "clone-"+name, "quantykube") // a different path each: -trimpath must hide it
		git(t, root, "clone", "-q", "--shared", "--no-checkout", ".", src)
		git(t, src, "checkout", "-q", "--detach", head)
		out := filepath.Join(tmp, "dist-"+name)
		release(t, src, "--out", out)
		outs = append(outs, out)
	}
	for _, f := range dist {
		a, b := read(t, filepath.Join(outs[0], f)), read(t, filepath.Join(outs[1], f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two releases of %s (%d and %d bytes)", f, head[:12], len(a), len(b))
		}
	}
	checkDist(t, outs[0], head[:12])

	// A change not committed is refused, before anything is built.
	src := filepath.Join(tmp, "clone-a", "quantykube")
	if err := os.WriteFile(filepath.Join(src, "stray.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("scripts/release.sh", "--out", filepath.Join(tmp, "dirty"))
	cmd.Dir = src
	msg, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("release.sh released a dirty tree without --allow-dirty")
	}
	if lines := strings.Split(strings.TrimSpace(string(msg)), "\n"); len(lines) != 1 ||
		!strings.Contains(lines[0], "stray.txt") || !strings.Contains(lines[0], "--allow-dirty") {
		t.Errorf("a dirty tree's refusal should be one line naming the path and the fix; got:\n%s", msg)
	}
}

// checkDist: SHA256SUMS is true; the archive is tagged with the version and
// version-commit; the manifest names the archive's image by its digest
// wherever it names an image; the binary says its version and commit.
func checkDist(t *testing.T, dir, commit string) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(read(t, filepath.Join(dir, "SHA256SUMS"))))
	summed := 0
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		h := sha256.Sum256(read(t, filepath.Join(dir, name)))
		if !ok || hex.EncodeToString(h[:]) != sum {
			t.Errorf("SHA256SUMS line %q does not match %s", sc.Text(), name)
		}
		summed++
	}
	if summed != 3 {
		t.Errorf("SHA256SUMS sums %d files, want 3 (the binary, the archive, the manifest)", summed)
	}

	version := strings.TrimPrefix(run(t, filepath.Join(dir, "quantykube"), "version"), "quantykube ")
	if !strings.HasSuffix(version, ", commit "+commit) {
		t.Errorf("quantykube version says %q, want the commit %s", version, commit)
	}
	v, _, _ := strings.Cut(version, ",")
	image := "ghcr.io/quantyroot/quantykube"
	if got := run(t, filepath.Join(dir, "quantykube"), "version", "--image"); got != image+":"+v+"-"+commit {
		t.Errorf("quantykube version --image = %q, want %s:%s-%s", got, image, v, commit)
	}

	digest, refs := ociIndex(t, filepath.Join(dir, "quantykube.oci.tar"))
	if want := []string{image + ":" + v, image + ":" + v + "-" + commit}; strings.Join(refs, " ") != strings.Join(want, " ") {
		t.Errorf("the archive's tags are %v, want %v", refs, want)
	}
	pinned := image + ":" + v + "-" + commit + "@" + digest
	named := regexp.MustCompile(`(?m)(?:image|value): *(\S*quantykube\S*)$`).FindAllStringSubmatch(string(read(t, filepath.Join(dir, "quantykube.yaml"))), -1)
	if len(named) != 2 {
		t.Errorf("quantykube.yaml names %d quantykube images, want 2 (the operator's and QUANTYKUBE_IMAGE)", len(named))
	}
	for _, m := range named {
		if m[1] != pinned {
			t.Errorf("quantykube.yaml names %s, want %s", m[1], pinned)
		}
	}
}

// ociIndex reads an OCI archive's index: the one digest its manifests share
// and their ref names, in order.
func ociIndex(t *testing.T, path string) (string, []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("%s has no index.json", path)
		}
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		if h.Name != "index.json" {
			continue
		}
		var idx struct {
			Manifests []struct {
				Digest      string            `json:"digest"`
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(tr).Decode(&idx); err != nil || len(idx.Manifests) == 0 {
			t.Fatalf("%s: index.json: %v (%d manifests)", path, err, len(idx.Manifests))
		}
		var refs []string
		for _, m := range idx.Manifests {
			if m.Digest != idx.Manifests[0].Digest {
				t.Errorf("%s: the index names two images, %s and %s", path, m.Digest, idx.Manifests[0].Digest)
			}
			refs = append(refs, m.Annotations["org.opencontainers.image.ref.name"])
		}
		return idx.Manifests[0].Digest, refs
	}
}

func release(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("scripts/release.sh", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("release.sh %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	t.Logf("%s%s", stderr.String(), out)
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git: release.sh releases a git commit")
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", bin, strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
