// Package house checks rules of how the code is kept that no compiler or
// linter here enforces (the helpers' "How the code should feel", issue #16):
// no function in internal/ over 80 lines (funclen_test.go), no grab-bag
// util/utils/common packages (pkgname_test.go), every ADR in docs/adr's
// index with a Status line (adr_test.go), and every package under cmd/ and
// internal/ in README's layout table (layout_test.go). They read the files
// (the Go source with go/parser); the package has no non-test code besides
// this comment.
package house
