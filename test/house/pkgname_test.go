package house

import (
	"path/filepath"
	"testing"
)

// grabBagNames are package names that say nothing about their concern.
var grabBagNames = map[string]bool{"util": true, "utils": true, "common": true}

func TestNoGrabBagPackages(t *testing.T) {
	_, files := parseInternal(t)
	seen := map[string]bool{}
	for _, sf := range files {
		dir := filepath.Dir(sf.path)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		pkg := sf.file.Name.Name
		if grabBagNames[pkg] || grabBagNames[filepath.Base(dir)] {
			t.Errorf("%s: package %s is a grab bag; name it for its one concern and move each helper beside its caller", dir, pkg)
		}
	}
}
