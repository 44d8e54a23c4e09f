//go:build !linux

package store

import "errors"

// releaseBinaryPages is Linux's madvise(MADV_PAGEOUT) (binpages_linux.go).
func releaseBinaryPages() (int, error) {
	return 0, errors.New("releasing the binary's pages is implemented on Linux only")
}
