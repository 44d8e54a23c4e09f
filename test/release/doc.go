// Package release checks scripts/release.sh as a person releasing would run
// it: from two fresh clones of HEAD, in two directories, it must write
// byte-identical dist/ files, and what it writes must hold together (the
// manifest pinned to the archive's own digest, SHA256SUMS true, the binary
// stamped with the commit). A dirty tree is refused with one line naming
// the fix. It tests the committed scripts (a clone has only HEAD), not
// uncommitted edits; the package has no non-test code besides this comment.
//
// Cost (2 cores, Go's build cache warm, etcdutl cached by scripts/deps.sh):
// two links of ./cmd/quantykube and two images, about 30 s of wall time
// (ADR 303 has the measurement). Cold caches make the first release.sh
// compile the tree, as any first build does.
package release
