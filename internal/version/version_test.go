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
		if r[1] != ImageRef() {
			t.Errorf("deploy/quantykube.yaml names %s, want %s (version.Version): run scripts/generate.sh", r[1], ImageRef())
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
