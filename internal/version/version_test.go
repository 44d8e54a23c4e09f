package version

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The manifest users apply must run the image of this version, and name it
// wherever it names an image (the operator's container and QUANTYKUBE_IMAGE,
// the image of the host pods it starts).
func TestManifestImageIsVersion(t *testing.T) {
	b, err := os.ReadFile("../../deploy/quantykube.yaml")
	if err != nil {
		t.Fatalf("read the manifest: %v", err)
	}
	refs := regexp.MustCompile(`(?m)(?:image|value): *"?(\S*quantykube\S*:[^\s"]+)`).FindAllStringSubmatch(string(b), -1)
	if len(refs) == 0 {
		t.Fatal("deploy/quantykube.yaml names no quantykube image")
	}
	for _, r := range refs {
		if want := Image + ":" + Version; r[1] != want {
			t.Errorf("deploy/quantykube.yaml names %s, want %s (version.Version): run scripts/generate.sh", r[1], want)
		}
	}
	if strings.Contains(string(b), ":dev") {
		t.Error("deploy/quantykube.yaml still names a :dev image")
	}
}

func TestVersionIsSemver(t *testing.T) {
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(Version) {
		t.Fatalf("Version %q is not vMAJOR.MINOR.PATCH[-PRE]", Version)
	}
}

// The tag of a build names its commit when one is stamped, and never a
// malformed one.
func TestTag(t *testing.T) {
	defer func(c string) { Commit = c }(Commit)
	for commit, want := range map[string]string{
		"":                   Version,
		"0123456789ab":       Version + "-0123456789ab",
		"0123456789ab-dirty": Version + "-0123456789ab-dirty",
		"0123456789abcdef":   Version, // not 12 digits: not a tag
		"main":               Version,
	} {
		Commit = commit
		if got := Tag(); got != want {
			t.Errorf("Commit %q: Tag() = %q, want %q", commit, got, want)
		}
	}
	Commit = "0123456789ab"
	if got, want := ImageRef(), Image+":"+Version+"-0123456789ab"; got != want {
		t.Errorf("ImageRef() = %q, want %q", got, want)
	}
	if got, want := String(), Version+", commit 0123456789ab"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
