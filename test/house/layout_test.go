package house

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readme is the repository's README, from this package's directory.
const readme = "../../README.md"

// layoutRow is a row of README's layout table: its first cell, one or more
// paths in backquotes separated by commas.
var layoutRow = regexp.MustCompile("(?m)^\\| (`[^|]+`) \\|")

// TestLayoutTableListsEveryPackage: every Go package under cmd/ and
// internal/ (a directory with a non-test .go file) has its row in README's
// layout table, and every cmd/ or internal/ path the table names exists.
func TestLayoutTableListsEveryPackage(t *testing.T) {
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatalf("read README: %v", err)
	}
	_, layout, ok := strings.Cut(string(b), "\n## Layout\n")
	if !ok {
		t.Fatal(`README has no "## Layout" section`)
	}
	if next := strings.Index(layout, "\n## "); next >= 0 {
		layout = layout[:next]
	}
	listed := map[string]bool{}
	for _, m := range layoutRow.FindAllStringSubmatch(layout, -1) {
		for _, cell := range strings.Split(m[1], ",") {
			p := strings.TrimSuffix(strings.Trim(strings.TrimSpace(cell), "`"), "/")
			listed[p] = true
		}
	}
	for _, pkg := range goPackages(t, "cmd", "internal") {
		if !listed[pkg] {
			t.Errorf("%s is not in README's layout table: add a row `%s` | what it holds", pkg, pkg)
		}
	}
	for p := range listed {
		if !strings.HasPrefix(p, "cmd/") && !strings.HasPrefix(p, "internal/") {
			continue
		}
		if _, err := os.Stat(filepath.Join("../..", p)); err != nil {
			t.Errorf("README's layout table names %s, which does not exist: fix or drop its row", p)
		}
	}
}

// goPackages lists, relative to the repository root, the directories under
// roots that hold a non-test Go file.
func goPackages(t *testing.T, roots ...string) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for _, root := range roots {
		err := filepath.WalkDir(filepath.Join("../..", root), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(d.Name(), ".go") || strings.HasSuffix(d.Name(), "_test.go") {
				return nil
			}
			rel, _ := filepath.Rel("../..", filepath.Dir(path))
			if !seen[rel] {
				seen[rel] = true
				out = append(out, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", root, err)
		}
	}
	if len(out) == 0 {
		t.Fatal("no Go packages under cmd/ or internal/: run the test from test/house")
	}
	return out
}
