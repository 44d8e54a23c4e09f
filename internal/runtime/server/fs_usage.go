package server

import (
	"io/fs"
	"path/filepath"
)

// dirUsage sums regular file sizes below dir (0 when missing).
func dirUsage(dir string) uint64 {
	var n uint64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += uint64(fi.Size())
			}
		}
		return nil
	})
	return n
}
