// Package house checks rules of how the code is kept that no compiler or
// linter here enforces (the helpers' "How the code should feel", issue #16):
// no function in internal/ over 80 lines (funclen_test.go), and no
// grab-bag util/utils/common packages (pkgname_test.go). They parse the
// source with go/parser; the package has no non-test code besides this
// comment.
package house
