// Package version is what a QuantyKube binary says it is: its release
// version, the commit it was built from, and the tag of its image
// (ghcr.io/quantyroot/quantykube:<Version>-<Commit>, scripts/release.sh).
//
// Invariants: Version is the tag deploy/quantykube.yaml names
// (scripts/generate.sh writes it there from this file; version_test.go
// checks it). Commit is empty in a plain `go build`; scripts/release.sh sets
// both with
//
//	go build -ldflags "-X github.com/quantyroot/quantykube/internal/version.Version=v0.1.0 \
//	    -X github.com/quantyroot/quantykube/internal/version.Commit=0123456789ab" ./cmd/quantykube
//
// and names its image by Tag (and by Version on a clean tree). A binary
// cannot carry its own image's digest (the digest covers the binary): the
// reference pinned by digest is in the release's dist/quantykube.yaml, and
// the operator records the one it runs in the Installation's status.
package version

import "regexp"

// Version is a semantic version with a leading "v". It is a var, not a
// const, so that -ldflags -X can set it.
var Version = "v0.1.0"

// Commit is the git commit the binary was built from: its first 12 hex
// digits, followed by "-dirty" when the tree had changes not committed.
// Empty when unknown (a build without scripts/release.sh's -ldflags).
var Commit = ""

// Image is the repository QuantyKube's release images are published under.
const Image = "ghcr.io/quantyroot/quantykube"

// commitForm is what Commit must look like to be part of a tag.
var commitForm = regexp.MustCompile(`^[0-9a-f]{12}(-dirty)?$`)

// Tag is this build's image tag: Version-Commit, or Version alone when the
// commit is unknown (or not of the form scripts/release.sh stamps).
func Tag() string {
	if !commitForm.MatchString(Commit) {
		return Version
	}
	return Version + "-" + Commit
}

// ImageRef is the image of this build: Image tagged with Tag.
func ImageRef() string { return Image + ":" + Tag() }

// String says the version and the commit in one line:
// "v0.1.0, commit 0123456789ab".
func String() string {
	c := Commit
	if c == "" {
		c = "unknown (not built by scripts/release.sh)"
	}
	return Version + ", commit " + c
}
