// Package version is QuantyKube's release version: the one string the binary
// reports (`quantykube version`) and the tag of its image
// (ghcr.io/quantyroot/quantykube:<Version>, named in deploy/quantykube.yaml).
//
// Invariant: Version is the tag deploy/quantykube.yaml names (scripts/generate.sh
// writes it there from this file; version_test.go checks it). A build may
// override it with
//
//	go build -ldflags "-X github.com/quantyroot/quantykube/internal/version.Version=v0.1.1" ./cmd/quantykube
//
// which scripts/image.sh does only when asked (QK_VERSION), never silently.
package version

// Version is a semantic version with a leading "v". It is a var, not a
// const, so that -ldflags -X can set it.
var Version = "v0.1.0"

// Image is the repository QuantyKube's release images are published under.
const Image = "ghcr.io/quantyroot/quantykube"

// ImageRef is the image of this build: Image tagged with Version.
func ImageRef() string { return Image + ":" + Version }
